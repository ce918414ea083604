const { createOrderService, OutOfStockError } = require('../src/orderService');

function setup({ stock = 10 } = {}) {
  const inventory = { available: jest.fn().mockResolvedValue(stock) };
  const payments = { charge: jest.fn().mockResolvedValue({ id: 'ch_1001', status: 'succeeded' }) };
  const clock = () => new Date('2024-05-01T09:30:00.000Z');
  return { inventory, payments, service: createOrderService({ inventory, payments, clock }) };
}

const cart = {
  customerId: 'cus_7',
  lines: [
    { sku: 'MUG-01', quantity: 2, unitPriceCents: 1250 },
    { sku: 'TEE-XL', quantity: 1, unitPriceCents: 2400 },
  ],
};

describe('placeOrder', () => {
  test('charges the customer for the cart total', async () => {
    const { service, payments } = setup();
    await service.placeOrder(cart);
    expect(payments.charge).toHaveBeenCalledTimes(1);
    expect(payments.charge).toHaveBeenCalledWith('cus_7', 4900);
  });

  test('returns the charge id from the payment provider', async () => {
    const { service } = setup();
    const order = await service.placeOrder(cart);
    expect(order).toEqual({
      customerId: 'cus_7',
      totalCents: 4900,
      chargeId: 'ch_1001',
      placedAt: '2024-05-01T09:30:00.000Z',
    });
  });

  test('rejects with OutOfStockError and does not charge when stock is short', async () => {
    const { service, payments } = setup({ stock: 1 });
    await expect(service.placeOrder(cart)).rejects.toBeInstanceOf(OutOfStockError);
    expect(payments.charge).not.toHaveBeenCalled();
  });
});
