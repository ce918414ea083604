'use strict';

class OutOfStockError extends Error {
  constructor(sku) {
    super(`SKU ${sku} is out of stock`);
    this.name = 'OutOfStockError';
    this.sku = sku;
  }
}

/**
 * Checkout flow: checks stock for every line, charges the customer once,
 * and returns the order summary that the confirmation page renders.
 */
function createOrderService({ inventory, payments, clock = () => new Date() }) {
  async function placeOrder(cart) {
    for (const line of cart.lines) {
      const available = await inventory.available(line.sku);
      if (available < line.quantity) throw new OutOfStockError(line.sku);
    }

    const totalCents = cart.lines.reduce((sum, line) => sum + line.quantity * line.unitPriceCents, 0);
    const charge = payments.charge(cart.customerId, totalCents);

    return {
      customerId: cart.customerId,
      totalCents,
      chargeId: charge.id,
      placedAt: clock().toISOString(),
    };
  }

  return { placeOrder };
}

module.exports = { createOrderService, OutOfStockError };
