'use strict';

const { itemsToRestock, purchaseOrderTotal } = require('../src/restock');

describe('itemsToRestock with a reorder point of 0', () => {
  test('does not reorder an item that still has one unit left', () => {
    const items = [{ sku: 'F-6', stock: 1, reorderPoint: 0, targetStock: 6 }];
    expect(itemsToRestock(items)).toEqual([]);
  });

  test('does not reorder an item with stock equal to the default reorder point', () => {
    const items = [{ sku: 'G-7', stock: 5, reorderPoint: 0, targetStock: 30 }];
    expect(itemsToRestock(items)).toEqual([]);
  });

  test('reorders only the sold-out items in a mixed list', () => {
    const items = [
      { sku: 'H-8', stock: 0, reorderPoint: 0, targetStock: 8 },
      { sku: 'J-9', stock: 3, reorderPoint: 0, targetStock: 8 },
      { sku: 'K-10', stock: 2, targetStock: 9 },
    ];
    expect(itemsToRestock(items)).toEqual([
      { sku: 'H-8', quantity: 8 },
      { sku: 'K-10', quantity: 7 },
    ]);
  });

  test('the purchase order total leaves out zero-reorder-point items that are in stock', () => {
    const items = [
      { sku: 'L-11', stock: 4, reorderPoint: 6, targetStock: 10 },
      { sku: 'M-12', stock: 2, reorderPoint: 0, targetStock: 12 },
    ];
    expect(purchaseOrderTotal(itemsToRestock(items), { 'L-11': 300, 'M-12': 45 })).toBe(1800);
  });
});
