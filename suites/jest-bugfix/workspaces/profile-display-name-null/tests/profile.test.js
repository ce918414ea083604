const { displayName, initials, FALLBACK_NAME } = require('../src/profile');

describe('displayName', () => {
  test('prefers the nickname from the profile', () => {
    const user = { firstName: 'Ada', lastName: 'Lovelace', profile: { nickname: '  countess ' } };
    expect(displayName(user)).toBe('countess');
  });

  test('falls back to first and last name when the user has no profile yet', () => {
    const user = { id: 42, firstName: 'Grace', lastName: 'Hopper', email: 'grace@navy.mil' };
    expect(displayName(user)).toBe('Grace Hopper');
  });

  test('uses the email local part when there is no name', () => {
    const user = { email: 'linus@kernel.org', profile: { nickname: '' } };
    expect(displayName(user)).toBe('linus');
  });

  test('returns the fallback for a missing user', () => {
    expect(displayName(null)).toBe(FALLBACK_NAME);
  });
});

describe('initials', () => {
  test('takes the first letter of the first two words', () => {
    expect(initials({ profile: { nickname: 'margaret h hamilton' } })).toBe('MH');
  });
});
