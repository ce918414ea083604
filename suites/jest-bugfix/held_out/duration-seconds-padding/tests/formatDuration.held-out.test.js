'use strict';

const { formatDuration, playlistSummary } = require('../src/formatDuration');

describe('formatDuration pads seconds below one hour', () => {
  test('pads one second past a minute', () => {
    expect(formatDuration(61)).toBe('1:01');
  });

  test('pads a duration under one minute', () => {
    expect(formatDuration(9)).toBe('0:09');
  });

  test('pads zero seconds on a whole number of minutes', () => {
    expect(formatDuration(2400)).toBe('40:00');
  });

  test('pads after dropping fractional seconds', () => {
    expect(formatDuration(65.9)).toBe('1:05');
  });
});

describe('playlistSummary', () => {
  test('pads the seconds of a short playlist total', () => {
    expect(playlistSummary([{ durationSeconds: 30 }, { durationSeconds: 33 }])).toBe('2 tracks · 1:03');
  });

  test('pads the seconds of a single track', () => {
    expect(playlistSummary([{ durationSeconds: 484 }])).toBe('1 track · 8:04');
  });
});
