'use strict';

const { slugify, truncate } = require('./text');

const WORDS_PER_MINUTE = 220;

function readingTimeMinutes(body) {
  const words = body.trim().split(/\s+/).filter(Boolean).length;
  return Math.max(1, Math.round(words / WORDS_PER_MINUTE));
}

/** Metadata stored next to a blog post and used for the listing cards. */
function buildPostMeta(post) {
  return {
    slug: slugify(post.title),
    excerpt: truncate(post.body.replace(/\s+/g, ' ').trim(), 80),
    readingTime: readingTimeMinutes(post.body),
  };
}

module.exports = { buildPostMeta, readingTimeMinutes };
