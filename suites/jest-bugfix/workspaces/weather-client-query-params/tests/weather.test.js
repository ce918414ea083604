jest.mock('../src/httpClient');

const http = require('../src/httpClient');
const { currentConditions, forecast } = require('../src/weather');

beforeEach(() => {
  jest.resetAllMocks();
});

describe('currentConditions', () => {
  beforeEach(() => {
    http.get.mockResolvedValue({
      status: 200,
      data: { name: 'Oslo', main: { temp: 275.15 }, weather: [{ description: 'light snow' }] },
    });
  });

  test('maps the API payload to the widget model', async () => {
    await expect(currentConditions('Oslo')).resolves.toEqual({
      city: 'Oslo',
      temperatureC: 2,
      description: 'light snow',
    });
  });

  test('sends the city as a query parameter', async () => {
    await currentConditions('Oslo');
    expect(http.get).toHaveBeenCalledWith('/current', { params: { city: 'Oslo', units: 'standard' } });
  });
});

describe('forecast', () => {
  beforeEach(() => {
    http.get.mockResolvedValue({
      status: 200,
      data: { list: [{ date: '2024-01-10', temp: { min: 268.15, max: 274.65 } }] },
    });
  });

  test('requests three days by default', async () => {
    await forecast('Bergen');
    expect(http.get).toHaveBeenCalledWith('/forecast', {
      params: { city: 'Bergen', days: 3, units: 'standard' },
    });
  });

  test('converts min and max to Celsius', async () => {
    await expect(forecast('Bergen', 1)).resolves.toEqual([{ date: '2024-01-10', minC: -5, maxC: 1.5 }]);
  });
});
