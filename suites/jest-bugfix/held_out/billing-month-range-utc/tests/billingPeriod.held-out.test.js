'use strict';

const { monthRange, isWithinPeriod } = require('../src/billingPeriod');

describe('monthRange start', () => {
  test('starts on the first of the requested month in a 31-day month', () => {
    expect(monthRange(2025, 7).start.toISOString()).toBe('2025-07-01T00:00:00.000Z');
  });

  test('starts on December 1st for month 12, not in the next year', () => {
    const { start, end } = monthRange(2023, 12);
    expect(start.toISOString()).toBe('2023-12-01T00:00:00.000Z');
    expect(start.getUTCFullYear()).toBe(2023);
    expect(end.toISOString()).toBe('2023-12-31T23:59:59.999Z');
  });

  test('covers exactly the days of a non-leap February', () => {
    const { start, end } = monthRange(2023, 2);
    expect(end.getTime() - start.getTime() + 1).toBe(28 * 24 * 60 * 60 * 1000);
  });
});

describe('isWithinPeriod', () => {
  test('includes the first instant of the month', () => {
    expect(isWithinPeriod('2025-11-01T00:00:00Z', 2025, 11)).toBe(true);
  });

  test('includes the last millisecond of the month', () => {
    expect(isWithinPeriod('2024-04-30T23:59:59.999Z', 2024, 4)).toBe(true);
  });

  test('includes a usage event in January', () => {
    expect(isWithinPeriod(Date.UTC(2026, 0, 17, 12, 30), 2026, 1)).toBe(true);
  });

  test('excludes the last instant of the previous month', () => {
    expect(isWithinPeriod('2025-06-30T23:59:59.999Z', 2025, 7)).toBe(false);
  });
});
