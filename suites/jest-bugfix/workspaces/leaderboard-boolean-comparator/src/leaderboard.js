'use strict';

/**
 * Orders leaderboard entries: highest score first; on a tie, whoever reached the
 * score first (smaller `achievedAt`, epoch ms) ranks higher. Does not modify `entries`.
 */
function rankPlayers(entries) {
  return [...entries]
    .sort((a, b) => a.score < b.score || (a.score === b.score && a.achievedAt > b.achievedAt))
    .map((entry, index) => ({ rank: index + 1, ...entry }));
}

function topN(entries, n = 10) {
  return rankPlayers(entries).slice(0, n);
}

/** Rank of one player, or null if they have no entry. */
function rankOf(entries, playerId) {
  const found = rankPlayers(entries).find((entry) => entry.playerId === playerId);
  return found ? found.rank : null;
}

module.exports = { rankPlayers, topN, rankOf };
