'use strict';

jest.mock('../src/httpClient');

const http = require('../src/httpClient');
const { currentConditions } = require('../src/weather');

const realFetch = global.fetch;

beforeEach(() => {
  jest.resetAllMocks();
});

afterEach(() => {
  global.fetch = realFetch;
});

const payload = (name) => ({ name, main: { temp: 298.05 }, weather: [{ description: 'scattered clouds' }] });

describe('currentConditions query parameters', () => {
  test('passes the city and units under params', async () => {
    http.get.mockResolvedValue({ status: 200, data: payload('Lisbon') });
    await currentConditions('Lisbon');
    expect(http.get).toHaveBeenCalledTimes(1);
    expect(http.get).toHaveBeenCalledWith('/current', { params: { city: 'Lisbon', units: 'standard' } });
  });

  test('does not put query values at the top level of the request options', async () => {
    http.get.mockResolvedValue({ status: 200, data: payload('Reykjavík') });
    await currentConditions('Reykjavík');
    const options = http.get.mock.calls[0][1];
    expect(options).not.toHaveProperty('city');
    expect(options).not.toHaveProperty('units');
    expect(options.params.city).toBe('Reykjavík');
  });

  test('the real HTTP client puts the city into the query string', async () => {
    http.get.mockImplementation(jest.requireActual('../src/httpClient').get);
    global.fetch = jest.fn().mockResolvedValue({ ok: true, status: 200, json: async () => payload('Nairobi') });
    await currentConditions('Nairobi');
    const url = new URL(String(global.fetch.mock.calls[0][0]));
    expect(url.pathname).toBe('/v2/current');
    expect(url.searchParams.get('city')).toBe('Nairobi');
    expect(url.searchParams.get('units')).toBe('standard');
  });

  test('resolves with the widget model when the API requires the city parameter', async () => {
    http.get.mockImplementation(jest.requireActual('../src/httpClient').get);
    global.fetch = jest.fn(async (url) =>
      new URL(String(url)).searchParams.get('city') === 'Santiago'
        ? { ok: true, status: 200, json: async () => payload('Santiago') }
        : { ok: false, status: 400, json: async () => ({ message: 'city is required' }) },
    );
    await expect(currentConditions('Santiago')).resolves.toEqual({
      city: 'Santiago',
      temperatureC: 24.9,
      description: 'scattered clouds',
    });
  });
});
