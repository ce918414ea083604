'use strict';

const text = require('../src/text');
const { slugify, truncate } = require('../src/text');
const { buildPostMeta } = require('../src/post');

describe('text module exports', () => {
  test('exports slugify and truncate as functions', () => {
    expect(Object.keys(text).sort()).toEqual(['slugify', 'truncate']);
    expect(typeof text.slugify).toBe('function');
    expect(typeof text.truncate).toBe('function');
  });

  test('slugify collapses punctuation and keeps digits', () => {
    expect(slugify('Hello, World — 2024 Edition!')).toBe('hello-world-2024-edition');
  });

  test('truncate supports a custom ellipsis', () => {
    expect(truncate('abcdefghij', 6, '...')).toBe('abc...');
  });

  test('truncate trims trailing spaces before the ellipsis', () => {
    expect(truncate('Lorem ipsum dolor sit amet', 13)).toBe('Lorem ipsum…');
  });
});

describe('buildPostMeta uses the text helpers', () => {
  test('slugifies an accented title and shortens a long body', () => {
    const body = 'Café culture in Zürich is older than you think. '.repeat(4);
    const meta = buildPostMeta({ title: 'Über Café Culture', body });
    expect(meta.slug).toBe('uber-cafe-culture');
    expect(meta.excerpt).toHaveLength(80);
    expect(meta.excerpt.endsWith('…')).toBe(true);
  });
});
