'use strict';

const { parse, compare, satisfiesMinimum } = require('../src/semver');

describe('parse only accepts dots between the numbers', () => {
  test('rejects underscores and slashes as separators', () => {
    expect(parse('3_4_5')).toBeNull();
    expect(parse('v7/8/9')).toBeNull();
  });

  test('rejects a bare run of digits', () => {
    expect(parse('12345')).toBeNull();
  });

  test('rejects a prerelease version whose separators are not dots', () => {
    expect(parse('4+0+1-rc.2')).toBeNull();
  });

  test('still parses a dotted version with a multi-digit patch', () => {
    expect(parse('v0.3.141')).toEqual({ major: 0, minor: 3, patch: 141, prerelease: null });
  });
});

describe('compare and satisfiesMinimum with malformed versions', () => {
  test('compare throws on a version separated by spaces', () => {
    expect(() => compare('2.0.0', '2 1 0')).toThrow('Invalid version: 2 1 0');
  });

  test('satisfiesMinimum throws instead of accepting a comma-separated version', () => {
    expect(() => satisfiesMinimum('20,11,1', '18.0.0')).toThrow(TypeError);
  });
});
