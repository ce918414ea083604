const { slugify } = require('../src/slugify');
const cases = require('./fixtures/cases.json');

describe('slugify', () => {
  for (const c of cases) {
    test(`turns ${JSON.stringify(c.args[0])} into ${c.expected}`, () => {
      expect(slugify(...c.args)).toBe(c.expected);
    });
  }

  test('returns a string without whitespace', () => {
    expect(slugify('a b\tc')).not.toMatch(/\s/);
  });
});
