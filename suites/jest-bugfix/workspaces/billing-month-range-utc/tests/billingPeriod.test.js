const { daysInMonth, monthRange, isWithinPeriod, proratedCents } = require('../src/billingPeriod');

describe('monthRange', () => {
  test('starts at midnight UTC on the first day of the month', () => {
    expect(monthRange(2024, 2).start.toISOString()).toBe('2024-02-01T00:00:00.000Z');
  });

  test('ends at the last millisecond of the month', () => {
    expect(monthRange(2024, 2).end.toISOString()).toBe('2024-02-29T23:59:59.999Z');
    expect(monthRange(2023, 12).end.toISOString()).toBe('2023-12-31T23:59:59.999Z');
  });

  test('rejects month numbers outside 1-12', () => {
    expect(() => monthRange(2024, 0)).toThrow(RangeError);
    expect(() => monthRange(2024, 13)).toThrow(RangeError);
  });
});

describe('isWithinPeriod', () => {
  test('includes a usage event in the middle of the month', () => {
    expect(isWithinPeriod('2024-02-15T10:00:00Z', 2024, 2)).toBe(true);
  });

  test('excludes the first instant of the next month', () => {
    expect(isWithinPeriod('2024-03-01T00:00:00Z', 2024, 2)).toBe(false);
  });
});

describe('proratedCents', () => {
  test('handles leap-year February', () => {
    expect(daysInMonth(2024, 2)).toBe(29);
    expect(proratedCents(2900, '2024-02-15T08:00:00Z')).toBe(1500);
  });
});
