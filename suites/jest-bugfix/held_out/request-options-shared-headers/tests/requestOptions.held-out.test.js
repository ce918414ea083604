'use strict';

const { DEFAULT_OPTIONS, buildRequestOptions, withBearerToken } = require('../src/requestOptions');

describe('buildRequestOptions keeps requests independent', () => {
  test('a bearer token from one request does not reach a later plain request', () => {
    withBearerToken('tok_abc987', { timeoutMs: 1200 });
    const next = buildRequestOptions({ retries: 0 });
    expect(next.headers).toEqual({ accept: 'application/json', 'user-agent': 'acme-sdk/3.4.0' });
  });

  test('extra headers of one request are not merged into the next one', () => {
    buildRequestOptions({ headers: { 'x-request-id': 'req-77' } });
    const options = buildRequestOptions({ headers: { 'x-tenant': 'tenant-9' } });
    expect(options.headers).toEqual({
      accept: 'application/json',
      'user-agent': 'acme-sdk/3.4.0',
      'x-tenant': 'tenant-9',
    });
  });

  test('overriding a default header leaves the defaults untouched', () => {
    const csv = buildRequestOptions({ headers: { accept: 'text/csv' } });
    expect(csv.headers.accept).toBe('text/csv');
    expect(DEFAULT_OPTIONS.headers.accept).toBe('application/json');
    expect(buildRequestOptions().headers.accept).toBe('application/json');
  });

  test('each call returns its own headers object', () => {
    const first = buildRequestOptions();
    const second = buildRequestOptions();
    expect(first.headers).not.toBe(second.headers);
    expect(first.headers).not.toBe(DEFAULT_OPTIONS.headers);
  });
});
