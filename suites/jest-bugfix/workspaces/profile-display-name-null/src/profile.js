'use strict';

const FALLBACK_NAME = 'Anonymous';

/**
 * Name shown in the header and in comment threads.
 * Prefers the nickname the user picked, then "First Last", then the local part of the email.
 */
function displayName(user) {
  if (!user) return FALLBACK_NAME;
  const nickname = user.profile.nickname;
  if (nickname && nickname.trim()) return nickname.trim();

  const fullName = [user.firstName, user.lastName].filter(Boolean).join(' ');
  if (fullName) return fullName;

  if (user.email) return user.email.split('@')[0];
  return FALLBACK_NAME;
}

/** Up to two letters for the avatar bubble. */
function initials(user) {
  return displayName(user)
    .split(/\s+/)
    .filter(Boolean)
    .slice(0, 2)
    .map((part) => part[0].toUpperCase())
    .join('');
}

module.exports = { displayName, initials, FALLBACK_NAME };
