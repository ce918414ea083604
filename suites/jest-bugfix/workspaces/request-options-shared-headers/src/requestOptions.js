'use strict';

const DEFAULT_OPTIONS = {
  timeoutMs: 5000,
  retries: 2,
  headers: {
    accept: 'application/json',
    'user-agent': 'acme-sdk/3.4.0',
  },
};

/**
 * Per-request options: `overrides` win over the defaults, and headers are merged
 * key by key so a caller can add `authorization` without losing `accept`.
 */
function buildRequestOptions(overrides = {}) {
  const options = { ...DEFAULT_OPTIONS, ...overrides };
  options.headers = Object.assign(DEFAULT_OPTIONS.headers, overrides.headers);
  return options;
}

function withBearerToken(token, overrides = {}) {
  return buildRequestOptions({
    ...overrides,
    headers: { ...overrides.headers, authorization: `Bearer ${token}` },
  });
}

module.exports = { DEFAULT_OPTIONS, buildRequestOptions, withBearerToken };
