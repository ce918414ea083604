'use strict';

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Calls `fn` until it resolves, retrying when it rejects.
 *
 * By default a call is attempted up to 3 times with a linear 10 ms backoff;
 * pass `attempts: 1` to turn retrying off.
 *
 * @param {(attempt: number) => Promise<T>} fn
 * @param {{ attempts?: number, backoffMs?: number, shouldRetry?: (err: Error) => boolean }} [options]
 * @returns {Promise<T>}
 * @template T
 */
async function withRetry(fn, { attempts = 1, backoffMs = 10, shouldRetry = () => true } = {}) {
  let lastError;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    try {
      return await fn(attempt);
    } catch (err) {
      lastError = err;
      if (attempt === attempts || !shouldRetry(err)) break;
      await sleep(backoffMs * attempt);
    }
  }
  throw lastError;
}

const isTransient = (err) => ['ECONNRESET', 'ETIMEDOUT', 'EAI_AGAIN'].includes(err && err.code);

module.exports = { withRetry, isTransient };
