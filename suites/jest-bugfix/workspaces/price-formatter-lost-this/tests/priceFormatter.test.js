const { PriceFormatter } = require('../src/priceFormatter');

describe('PriceFormatter', () => {
  const usd = new PriceFormatter({ currency: 'USD', locale: 'en-US' });

  test('formats cents as dollars', () => {
    expect(usd.format(129900)).toBe('$1,299.00');
  });

  test('formats a list of prices for the product grid', () => {
    expect(usd.formatAll([500, 1999, 25])).toEqual(['$5.00', '$19.99', '$0.25']);
  });

  test('formats a price range', () => {
    expect(usd.formatRange(1000, 2500)).toBe('$10.00 – $25.00');
  });

  test('collapses a range with equal bounds to one price', () => {
    expect(usd.formatRange(1000, 1000)).toBe('$10.00');
  });
});
