const { itemsToRestock, purchaseOrderTotal } = require('../src/restock');

describe('itemsToRestock', () => {
  test('orders items at or below their reorder point up to the target stock', () => {
    const items = [
      { sku: 'A-1', stock: 3, reorderPoint: 4, targetStock: 20 },
      { sku: 'B-2', stock: 9, reorderPoint: 4, targetStock: 20 },
    ];
    expect(itemsToRestock(items)).toEqual([{ sku: 'A-1', quantity: 17 }]);
  });

  test('uses the default reorder point when none is configured', () => {
    const items = [{ sku: 'C-3', stock: 5, targetStock: 12 }];
    expect(itemsToRestock(items)).toEqual([{ sku: 'C-3', quantity: 7 }]);
  });

  test('treats a reorder point of 0 as "reorder only when sold out"', () => {
    const items = [
      { sku: 'D-4', stock: 2, reorderPoint: 0, targetStock: 10 },
      { sku: 'E-5', stock: 0, reorderPoint: 0, targetStock: 10 },
    ];
    expect(itemsToRestock(items)).toEqual([{ sku: 'E-5', quantity: 10 }]);
  });
});

describe('purchaseOrderTotal', () => {
  test('multiplies quantities by unit cost', () => {
    const lines = [{ sku: 'A-1', quantity: 17 }, { sku: 'E-5', quantity: 10 }];
    expect(purchaseOrderTotal(lines, { 'A-1': 250, 'E-5': 1200 })).toBe(16250);
  });
});
