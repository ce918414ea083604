'use strict';

const { withRetry, isTransient } = require('../src/retry');

const timeout = () => Object.assign(new Error('request timed out'), { code: 'ETIMEDOUT' });
const dnsHiccup = () => Object.assign(new Error('getaddrinfo EAI_AGAIN api.internal'), { code: 'EAI_AGAIN' });

describe('withRetry default attempts', () => {
  test('retries once and resolves on the second attempt when only backoff is given', async () => {
    const fn = jest.fn().mockRejectedValueOnce(timeout()).mockResolvedValue({ rows: 4 });
    await expect(withRetry(fn, { backoffMs: 0 })).resolves.toEqual({ rows: 4 });
    expect(fn).toHaveBeenCalledTimes(2);
  });

  test('gives up after exactly three attempts by default', async () => {
    const fn = jest.fn().mockRejectedValue(timeout());
    await expect(withRetry(fn, { backoffMs: 0 })).rejects.toThrow('request timed out');
    expect(fn).toHaveBeenCalledTimes(3);
  });

  test('retries transient errors three times by default when shouldRetry is given', async () => {
    const fn = jest.fn().mockRejectedValueOnce(dnsHiccup()).mockRejectedValueOnce(dnsHiccup()).mockResolvedValue('resolved');
    await expect(withRetry(fn, { backoffMs: 0, shouldRetry: isTransient })).resolves.toBe('resolved');
    expect(fn).toHaveBeenCalledTimes(3);
  });

  test('passes the attempt number to each default attempt', async () => {
    const fn = jest.fn(async (attempt) => {
      if (attempt < 3) throw timeout();
      return `succeeded on attempt ${attempt}`;
    });
    await expect(withRetry(fn, { backoffMs: 0 })).resolves.toBe('succeeded on attempt 3');
    expect(fn.mock.calls.map(([attempt]) => attempt)).toEqual([1, 2, 3]);
  });
});
