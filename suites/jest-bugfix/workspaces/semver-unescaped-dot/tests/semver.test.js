const { parse, compare, satisfiesMinimum } = require('../src/semver');

describe('parse', () => {
  test('parses a plain release with a leading v', () => {
    expect(parse('v1.12.3')).toEqual({ major: 1, minor: 12, patch: 3, prerelease: null });
  });

  test('parses a prerelease tag', () => {
    expect(parse('2.0.0-beta.1')).toEqual({ major: 2, minor: 0, patch: 0, prerelease: 'beta.1' });
  });

  test('rejects versions that do not use dots as separators', () => {
    expect(parse('1x2x3')).toBeNull();
    expect(parse('10-4-2')).toBeNull();
    expect(parse('1.2')).toBeNull();
  });
});

describe('compare', () => {
  test('orders versions numerically, not lexically', () => {
    const sorted = ['1.10.0', '1.2.0', '1.2.0-rc.1', '0.9.9'].sort(compare);
    expect(sorted).toEqual(['0.9.9', '1.2.0-rc.1', '1.2.0', '1.10.0']);
  });

  test('throws on an invalid version', () => {
    expect(() => compare('1.0.0', 'latest')).toThrow('Invalid version: latest');
  });

  test('satisfiesMinimum accepts equal and newer versions', () => {
    expect(satisfiesMinimum('18.17.1', '18.0.0')).toBe(true);
    expect(satisfiesMinimum('16.20.2', '18.0.0')).toBe(false);
  });
});
