'use strict';

/** URL-safe slug: strips accents, lowercases, joins words with single dashes. */
function slugify(input) {
  return String(input)
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
}

/** Cuts `text` to at most `max` characters, ending on the ellipsis. */
function truncate(text, max, ellipsis = '…') {
  if (text.length <= max) return text;
  return text.slice(0, Math.max(0, max - ellipsis.length)).trimEnd() + ellipsis;
}

exports = { slugify, truncate };
