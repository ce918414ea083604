'use strict';

const { rankPlayers, topN, rankOf } = require('../src/leaderboard');

const board = [
  { playerId: 'quinn', score: 75, achievedAt: 1710000005000 },
  { playerId: 'ruth', score: 990, achievedAt: 1710000009000 },
  { playerId: 'sven', score: 75, achievedAt: 1710000002000 },
  { playerId: 'tara', score: 310, achievedAt: 1710000004000 },
  { playerId: 'uma', score: 0, achievedAt: 1710000001000 },
];

describe('rankPlayers ordering', () => {
  test('ranks a board listed in ascending score order highest first', () => {
    const ascending = [
      { playerId: 'a', score: 10, achievedAt: 1 },
      { playerId: 'b', score: 20, achievedAt: 2 },
      { playerId: 'c', score: 30, achievedAt: 3 },
      { playerId: 'd', score: 40, achievedAt: 4 },
    ];
    expect(rankPlayers(ascending).map((e) => e.playerId)).toEqual(['d', 'c', 'b', 'a']);
  });

  test('breaks a three-way tie by who reached the score first', () => {
    const tied = [
      { playerId: 'late', score: 500, achievedAt: 1710000300000 },
      { playerId: 'middle', score: 500, achievedAt: 1710000200000 },
      { playerId: 'early', score: 500, achievedAt: 1710000100000 },
    ];
    expect(rankPlayers(tied).map((e) => [e.rank, e.playerId])).toEqual([
      [1, 'early'],
      [2, 'middle'],
      [3, 'late'],
    ]);
  });

  test('orders a mixed board by score and then by time', () => {
    expect(rankPlayers(board).map((e) => [e.rank, e.playerId])).toEqual([
      [1, 'ruth'],
      [2, 'tara'],
      [3, 'sven'],
      [4, 'quinn'],
      [5, 'uma'],
    ]);
  });
});

describe('topN and rankOf', () => {
  test('topN returns the best three players', () => {
    expect(topN(board, 3).map((e) => e.playerId)).toEqual(['ruth', 'tara', 'sven']);
  });

  test('rankOf reports the rank of a known player', () => {
    expect(rankOf(board, 'tara')).toBe(2);
    expect(rankOf(board, 'quinn')).toBe(4);
  });
});
