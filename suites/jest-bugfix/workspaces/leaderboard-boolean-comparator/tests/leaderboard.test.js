const { rankPlayers, topN, rankOf } = require('../src/leaderboard');

const entries = [
  { playerId: 'kim', score: 120, achievedAt: 1700000300000 },
  { playerId: 'ola', score: 450, achievedAt: 1700000100000 },
  { playerId: 'mei', score: 310, achievedAt: 1700000200000 },
  { playerId: 'raj', score: 450, achievedAt: 1700000050000 },
];

describe('rankPlayers', () => {
  test('orders players by score, highest first, breaking ties by time', () => {
    expect(rankPlayers(entries).map((e) => [e.rank, e.playerId])).toEqual([
      [1, 'raj'],
      [2, 'ola'],
      [3, 'mei'],
      [4, 'kim'],
    ]);
  });

  test('does not reorder the caller array', () => {
    const copy = entries.slice();
    rankPlayers(entries);
    expect(entries).toEqual(copy);
  });

  test('returns an empty board for no entries', () => {
    expect(rankPlayers([])).toEqual([]);
  });
});

describe('topN and rankOf', () => {
  test('topN returns the best n players', () => {
    expect(topN(entries, 2).map((e) => e.playerId)).toEqual(['raj', 'ola']);
  });

  test('rankOf returns null for an unknown player', () => {
    expect(rankOf(entries, 'zoe')).toBeNull();
  });
});
