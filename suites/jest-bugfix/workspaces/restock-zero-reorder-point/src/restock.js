'use strict';

const DEFAULT_REORDER_POINT = 5;

/**
 * Lines for the nightly purchase order: every SKU whose stock is at or below its
 * reorder point, topped back up to its target level. SKUs without a configured
 * reorder point use the warehouse default; a reorder point of 0 means
 * "only reorder once it is sold out".
 */
function itemsToRestock(items) {
  return items
    .filter((item) => {
      const reorderPoint = item.reorderPoint || DEFAULT_REORDER_POINT;
      return item.stock <= reorderPoint;
    })
    .map((item) => ({
      sku: item.sku,
      quantity: Math.max(item.targetStock - item.stock, 0),
    }))
    .filter((line) => line.quantity > 0);
}

function purchaseOrderTotal(lines, unitCostBySku) {
  return lines.reduce((sum, line) => sum + line.quantity * (unitCostBySku[line.sku] || 0), 0);
}

module.exports = { itemsToRestock, purchaseOrderTotal, DEFAULT_REORDER_POINT };
