'use strict';

/**
 * Formats integer cent amounts for the storefront in one currency and locale.
 */
class PriceFormatter {
  constructor({ currency = 'USD', locale = 'en-US' } = {}) {
    this.currency = currency;
    this.locale = locale;
    this.numberFormat = new Intl.NumberFormat(locale, { style: 'currency', currency });
  }

  format(cents) {
    return this.numberFormat.format(cents / 100);
  }

  /** Used by the product grid to format a whole page of prices at once. */
  formatAll(centsList) {
    return centsList.map(this.format);
  }

  formatRange(minCents, maxCents) {
    if (minCents === maxCents) return this.format(minCents);
    return `${this.format(minCents)} – ${this.format(maxCents)}`;
  }
}

module.exports = { PriceFormatter };
