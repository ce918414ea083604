'use strict';

const http = require('./httpClient');

const toCelsius = (kelvin) => Math.round((kelvin - 273.15) * 10) / 10;

async function currentConditions(city) {
  const { data } = await http.get('/current', { city, units: 'standard' });
  return {
    city: data.name,
    temperatureC: toCelsius(data.main.temp),
    description: data.weather[0].description,
  };
}

async function forecast(city, days = 3) {
  const { data } = await http.get('/forecast', { params: { city, days, units: 'standard' } });
  return data.list.map((entry) => ({
    date: entry.date,
    minC: toCelsius(entry.temp.min),
    maxC: toCelsius(entry.temp.max),
  }));
}

module.exports = { currentConditions, forecast };
