const { paginate } = require('../src/paginate');

const range = (n) => Array.from({ length: n }, (_, i) => i + 1);

describe('paginate', () => {
  test('returns a full first page', () => {
    const result = paginate(range(23), 1, 10);
    expect(result.items).toEqual(range(10));
    expect(result.hasPrev).toBe(false);
    expect(result.hasNext).toBe(true);
  });

  test('returns the remaining items on the last page', () => {
    const result = paginate(range(23), 3, 10);
    expect(result.items).toEqual([21, 22, 23]);
    expect(result.hasNext).toBe(false);
  });

  test('computes totalPages and clamps out-of-range pages', () => {
    expect(paginate(range(23), 99, 10)).toMatchObject({ page: 3, totalPages: 3, totalItems: 23 });
    expect(paginate(range(23), -4, 10).page).toBe(1);
  });

  test('treats an empty list as a single empty page', () => {
    expect(paginate([], 1, 10)).toMatchObject({ items: [], page: 1, totalPages: 1, hasNext: false });
  });

  test('rejects a non-positive page size', () => {
    expect(() => paginate(range(5), 1, 0)).toThrow(RangeError);
  });
});
