'use strict';

const pad2 = (n) => String(n).padStart(2, '0');

/**
 * Track length for the player UI: "m:ss", or "h:mm:ss" from one hour up.
 * Anything that is not a finite, non-negative number renders as "--:--".
 */
function formatDuration(totalSeconds) {
  if (!Number.isFinite(totalSeconds) || totalSeconds < 0) return '--:--';
  const secs = Math.floor(totalSeconds);
  const hours = Math.floor(secs / 3600);
  const minutes = Math.floor((secs % 3600) / 60);
  const seconds = secs % 60;

  if (hours > 0) return `${hours}:${pad2(minutes)}:${pad2(seconds)}`;
  return `${minutes}:${seconds}`;
}

/** Footer line under a playlist, e.g. "12 tracks · 48:05". */
function playlistSummary(tracks) {
  const total = tracks.reduce((sum, track) => sum + (track.durationSeconds || 0), 0);
  const label = tracks.length === 1 ? 'track' : 'tracks';
  return `${tracks.length} ${label} · ${formatDuration(total)}`;
}

module.exports = { formatDuration, playlistSummary };
