'use strict';

/**
 * Returns one 1-based page of `items` plus the metadata the list views render
 * ("Page 2 of 5", prev/next buttons). Out-of-range pages are clamped.
 */
function paginate(items, page = 1, pageSize = 10) {
  if (!Number.isInteger(pageSize) || pageSize < 1) {
    throw new RangeError(`pageSize must be a positive integer, got ${pageSize}`);
  }
  const totalPages = Math.max(1, Math.ceil(items.length / pageSize));
  const current = Math.min(Math.max(1, page), totalPages);
  const start = (current - 1) * pageSize;
  const end = start + pageSize - 1;

  return {
    items: items.slice(start, end),
    page: current,
    totalPages,
    totalItems: items.length,
    hasPrev: current > 1,
    hasNext: current < totalPages,
  };
}

module.exports = { paginate };
