const { buildPostMeta, readingTimeMinutes } = require('../src/post');

describe('readingTimeMinutes', () => {
  test('rounds to whole minutes with a minimum of one', () => {
    expect(readingTimeMinutes('just a few words')).toBe(1);
    expect(readingTimeMinutes('word '.repeat(660))).toBe(3);
  });
});

describe('buildPostMeta', () => {
  test('derives slug, excerpt and reading time', () => {
    const meta = buildPostMeta({ title: 'Shipping Node 20 to Production', body: 'We upgraded.\n\nIt went fine.' });
    expect(meta).toEqual({
      slug: 'shipping-node-20-to-production',
      excerpt: 'We upgraded. It went fine.',
      readingTime: 1,
    });
  });
});
