'use strict';

/** Turns a title into a URL slug: lower case, words joined by single dashes, no punctuation. */
function slugify(title) {
  // TODO: implement
  return title;
}

module.exports = { slugify };
