'use strict';

const { createOrderService } = require('../src/orderService');

const clock = () => new Date('2025-11-20T16:45:00.000Z');

function serviceWith(payments) {
  const inventory = { available: jest.fn().mockResolvedValue(50) };
  return createOrderService({ inventory, payments, clock });
}

const bookCart = {
  customerId: 'cus_42',
  lines: [{ sku: 'BOOK-9', quantity: 3, unitPriceCents: 1599 }],
};

describe('placeOrder waits for the payment provider', () => {
  test('the order summary carries the id of the resolved charge', async () => {
    const payments = { charge: jest.fn().mockResolvedValue({ id: 'ch_2002', status: 'succeeded' }) };
    await expect(serviceWith(payments).placeOrder(bookCart)).resolves.toEqual({
      customerId: 'cus_42',
      totalCents: 4797,
      chargeId: 'ch_2002',
      placedAt: '2025-11-20T16:45:00.000Z',
    });
  });

  test('each order gets the id of its own charge', async () => {
    const payments = {
      charge: jest
        .fn()
        .mockResolvedValueOnce({ id: 'ch_a1', status: 'succeeded' })
        .mockResolvedValueOnce({ id: 'ch_b2', status: 'succeeded' }),
    };
    const service = serviceWith(payments);
    const first = await service.placeOrder(bookCart);
    const second = await service.placeOrder({ customerId: 'cus_43', lines: [{ sku: 'PEN-1', quantity: 10, unitPriceCents: 120 }] });
    expect([first.chargeId, second.chargeId]).toEqual(['ch_a1', 'ch_b2']);
    expect(payments.charge).toHaveBeenLastCalledWith('cus_43', 1200);
  });

  test('a declined charge rejects the order', async () => {
    const declined = new Error('card_declined');
    // A thenable that rejects only when awaited, so an un-awaited charge leaves no stray rejection.
    const payments = { charge: jest.fn(() => ({ then: (resolve, reject) => reject(declined) })) };
    await expect(serviceWith(payments).placeOrder(bookCart)).rejects.toThrow('card_declined');
  });

  test('a charge resolved later in the microtask queue is still picked up', async () => {
    const payments = {
      charge: jest.fn(() =>
        Promise.resolve()
          .then(() => null)
          .then(() => ({ id: 'ch_late_77', status: 'succeeded' })),
      ),
    };
    const order = await serviceWith(payments).placeOrder(bookCart);
    expect(order.chargeId).toBe('ch_late_77');
  });
});
