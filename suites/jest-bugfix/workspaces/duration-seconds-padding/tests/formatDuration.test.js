const { formatDuration, playlistSummary } = require('../src/formatDuration');

describe('formatDuration', () => {
  test('formats minutes and two-digit seconds', () => {
    expect(formatDuration(754)).toBe('12:34');
  });

  test('zero-pads single-digit seconds', () => {
    expect(formatDuration(125)).toBe('2:05');
    expect(formatDuration(600)).toBe('10:00');
  });

  test('switches to h:mm:ss from one hour up', () => {
    expect(formatDuration(3725)).toBe('1:02:05');
  });

  test('renders invalid input as a placeholder', () => {
    expect(formatDuration(-1)).toBe('--:--');
    expect(formatDuration(NaN)).toBe('--:--');
  });
});

describe('playlistSummary', () => {
  test('sums track lengths', () => {
    const tracks = [{ durationSeconds: 200 }, { durationSeconds: 187 }, { durationSeconds: 241 }];
    expect(playlistSummary(tracks)).toBe('3 tracks · 10:28');
  });
});
