const { DEFAULT_OPTIONS, buildRequestOptions, withBearerToken } = require('../src/requestOptions');

describe('buildRequestOptions', () => {
  test('returns the defaults when called without overrides', () => {
    expect(buildRequestOptions()).toEqual({
      timeoutMs: 5000,
      retries: 2,
      headers: { accept: 'application/json', 'user-agent': 'acme-sdk/3.4.0' },
    });
  });

  test('lets callers override scalar options', () => {
    expect(buildRequestOptions({ timeoutMs: 250 })).toMatchObject({ timeoutMs: 250, retries: 2 });
  });

  test('merges extra headers over the default headers', () => {
    const options = withBearerToken('tok_123');
    expect(options.headers).toEqual({
      accept: 'application/json',
      'user-agent': 'acme-sdk/3.4.0',
      authorization: 'Bearer tok_123',
    });
  });

  test('does not leak headers from one request into the next', () => {
    withBearerToken('tok_secret');
    expect(buildRequestOptions().headers).not.toHaveProperty('authorization');
    expect(DEFAULT_OPTIONS.headers).toEqual({
      accept: 'application/json',
      'user-agent': 'acme-sdk/3.4.0',
    });
  });
});
