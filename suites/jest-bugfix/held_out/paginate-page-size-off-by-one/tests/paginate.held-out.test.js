'use strict';

const { paginate } = require('../src/paginate');

const range = (n) => Array.from({ length: n }, (_, i) => i + 1);

describe('paginate page contents', () => {
  test('a middle page holds exactly pageSize items', () => {
    const result = paginate(range(12), 2, 5);
    expect(result.items).toEqual([6, 7, 8, 9, 10]);
    expect(result).toMatchObject({ page: 2, totalPages: 3, hasPrev: true, hasNext: true });
  });

  test('a list that fits one page exactly is returned whole', () => {
    const letters = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
    expect(paginate(letters, 1, 7).items).toEqual(letters);
  });

  test('an exactly full last page keeps its final item', () => {
    expect(paginate(range(16), 4, 4).items).toEqual([13, 14, 15, 16]);
  });

  test('a page size of one returns the single item on that page', () => {
    expect(paginate(['x', 'y', 'z'], 2, 1).items).toEqual(['y']);
  });

  test('walking every page yields every item exactly once', () => {
    const items = range(17);
    const { totalPages } = paginate(items, 1, 3);
    const seen = [];
    for (let page = 1; page <= totalPages; page++) seen.push(...paginate(items, page, 3).items);
    expect(seen).toEqual(items);
  });

  test('the default page size is ten items', () => {
    expect(paginate(range(30), 2).items).toEqual([11, 12, 13, 14, 15, 16, 17, 18, 19, 20]);
  });
});
