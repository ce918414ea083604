'use strict';

const { displayName, initials, FALLBACK_NAME } = require('../src/profile');

describe('displayName for users without a profile', () => {
  test('uses first and last name when the profile key is absent', () => {
    const user = { id: 7, firstName: 'Barbara', lastName: 'Liskov', email: 'liskov@mit.edu' };
    expect(displayName(user)).toBe('Barbara Liskov');
  });

  test('uses only the first name when there is no last name and no profile', () => {
    expect(displayName({ firstName: 'Edsger' })).toBe('Edsger');
  });

  test('uses the email local part when there is neither a profile nor a name', () => {
    expect(displayName({ email: 'ken.thompson@bell-labs.com' })).toBe('ken.thompson');
  });

  test('returns the fallback for a user with no profile, name or email', () => {
    expect(displayName({ id: 99 })).toBe(FALLBACK_NAME);
  });

  test('treats a null profile like a missing one', () => {
    expect(displayName({ firstName: 'Alan', lastName: 'Turing', profile: null })).toBe('Alan Turing');
  });
});

describe('initials for users without a profile', () => {
  test('takes the initials of the full name', () => {
    expect(initials({ firstName: 'dennis', lastName: 'ritchie' })).toBe('DR');
  });
});
