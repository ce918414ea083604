const { slugify, truncate } = require('../src/text');

describe('slugify', () => {
  test('lowercases, strips accents and joins words with dashes', () => {
    expect(slugify('  Crème Brûlée: A Love Story! ')).toBe('creme-brulee-a-love-story');
  });
});

describe('truncate', () => {
  test('leaves short text alone', () => {
    expect(truncate('hello', 10)).toBe('hello');
  });

  test('cuts long text and appends an ellipsis', () => {
    expect(truncate('The quick brown fox jumps', 12)).toBe('The quick b…');
  });
});
