const { withRetry, isTransient } = require('../src/retry');

const transient = () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });

describe('withRetry', () => {
  test('resolves with the first successful result', async () => {
    const fn = jest.fn().mockResolvedValue('ok');
    await expect(withRetry(fn)).resolves.toBe('ok');
    expect(fn).toHaveBeenCalledTimes(1);
  });

  test('retries a failing call up to 3 times by default', async () => {
    const fn = jest
      .fn()
      .mockRejectedValueOnce(transient())
      .mockRejectedValueOnce(transient())
      .mockResolvedValue('third time lucky');
    await expect(withRetry(fn)).resolves.toBe('third time lucky');
    expect(fn).toHaveBeenCalledTimes(3);
  });

  test('rethrows the last error once attempts are exhausted', async () => {
    const fn = jest.fn().mockRejectedValue(transient());
    await expect(withRetry(fn, { attempts: 2, backoffMs: 0 })).rejects.toThrow('socket hang up');
    expect(fn).toHaveBeenCalledTimes(2);
  });

  test('stops early when shouldRetry says the error is permanent', async () => {
    const fn = jest.fn().mockRejectedValue(new Error('401 Unauthorized'));
    await expect(withRetry(fn, { attempts: 5, backoffMs: 0, shouldRetry: isTransient })).rejects.toThrow('401');
    expect(fn).toHaveBeenCalledTimes(1);
  });
});
