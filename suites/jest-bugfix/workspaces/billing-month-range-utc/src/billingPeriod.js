'use strict';

/** Number of days in a calendar month (month is 1-12). */
function daysInMonth(year, month) {
  return new Date(Date.UTC(year, month, 0)).getUTCDate();
}

/**
 * The billing period for a calendar month, as UTC instants.
 * `month` is 1-12 as shown on invoices; `end` is the last millisecond of the month.
 */
function monthRange(year, month) {
  if (!Number.isInteger(month) || month < 1 || month > 12) {
    throw new RangeError(`month must be an integer from 1 to 12, got ${month}`);
  }
  const start = new Date(Date.UTC(year, month, 1));
  const end = new Date(Date.UTC(year, month, 1) - 1);
  return { start, end };
}

function isWithinPeriod(instant, year, month) {
  const { start, end } = monthRange(year, month);
  const t = new Date(instant).getTime();
  return t >= start.getTime() && t <= end.getTime();
}

/** Charge for the rest of the month, counting the activation day itself. */
function proratedCents(monthlyCents, activatedAt) {
  const date = new Date(activatedAt);
  const total = daysInMonth(date.getUTCFullYear(), date.getUTCMonth() + 1);
  const remaining = total - date.getUTCDate() + 1;
  return Math.round((monthlyCents * remaining) / total);
}

module.exports = { daysInMonth, monthRange, isWithinPeriod, proratedCents };
