'use strict';

const { PriceFormatter } = require('../src/priceFormatter');

describe('PriceFormatter.formatAll', () => {
  test('formats large and tiny amounts in a list', () => {
    const usd = new PriceFormatter({ currency: 'USD', locale: 'en-US' });
    expect(usd.formatAll([100000, 1])).toEqual(['$1,000.00', '$0.01']);
  });

  test('works with the default currency and locale', () => {
    expect(new PriceFormatter().formatAll([350])).toEqual(['$3.50']);
  });

  test('uses the currency of the formatter it is called on', () => {
    const eur = new PriceFormatter({ currency: 'EUR', locale: 'en-US' });
    expect(eur.formatAll([2000, 4550])).toEqual(['€20.00', '€45.50']);
  });

  test('formats each item the same way format does', () => {
    const gbp = new PriceFormatter({ currency: 'GBP', locale: 'en-GB' });
    const prices = [4999, 12500, 7];
    expect(gbp.formatAll(prices)).toEqual(prices.map((cents) => gbp.format(cents)));
  });

  test('returns an empty list for no prices', () => {
    expect(new PriceFormatter().formatAll([])).toEqual([]);
  });
});
