'use strict';

const BASE_URL = 'https://api.weather.example.test/v2';

/**
 * GET a JSON resource from the weather API.
 * `options.params` becomes the query string; `options.headers` are sent as-is.
 * Resolves to `{ status, data }`.
 */
async function get(path, options = {}) {
  const url = new URL(BASE_URL + path);
  for (const [key, value] of Object.entries(options.params || {})) {
    url.searchParams.set(key, String(value));
  }
  const res = await fetch(url, {
    headers: { accept: 'application/json', ...options.headers },
  });
  if (!res.ok) {
    throw new Error(`GET ${url.pathname} failed with HTTP ${res.status}`);
  }
  return { status: res.status, data: await res.json() };
}

module.exports = { get, BASE_URL };
