'use strict';

// MAJOR.MINOR.PATCH with an optional leading "v" and an optional "-prerelease" tag.
const SEMVER = /^v?(\d+).(\d+).(\d+)(?:-([0-9A-Za-z.-]+))?$/;

function parse(version) {
  const match = SEMVER.exec(String(version).trim());
  if (!match) return null;
  return {
    major: Number(match[1]),
    minor: Number(match[2]),
    patch: Number(match[3]),
    prerelease: match[4] || null,
  };
}

/** Negative if a < b, positive if a > b, 0 if equal. A prerelease sorts before its release. */
function compare(a, b) {
  const pa = parse(a);
  const pb = parse(b);
  if (!pa || !pb) throw new TypeError(`Invalid version: ${pa ? b : a}`);
  for (const key of ['major', 'minor', 'patch']) {
    if (pa[key] !== pb[key]) return pa[key] - pb[key];
  }
  if (pa.prerelease === pb.prerelease) return 0;
  if (!pa.prerelease) return 1;
  if (!pb.prerelease) return -1;
  return pa.prerelease < pb.prerelease ? -1 : 1;
}

const satisfiesMinimum = (version, minimum) => compare(version, minimum) >= 0;

module.exports = { parse, compare, satisfiesMinimum };
