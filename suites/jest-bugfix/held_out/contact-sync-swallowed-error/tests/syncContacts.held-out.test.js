'use strict';

const { syncContacts, SyncError } = require('../src/syncContacts');

const quietLogger = () => ({ warn: jest.fn() });

const batch = [
  { id: 'a1', email: 'dee@example.org' },
  { id: 'b2', email: 'eli@example.org' },
  { id: 'c3', email: 'fay@example.org' },
  { id: 'd4', email: 'gus@example.org' },
];

const failingFor = (ids, message = '503 Service Unavailable') =>
  jest.fn((contact) => (ids.includes(contact.id) ? Promise.reject(new Error(message)) : Promise.resolve({ ok: 1 })));

describe('syncContacts reports failed upserts', () => {
  test('lists every failed contact in input order', async () => {
    const crm = { upsert: failingFor(['d4', 'b2']) };
    const error = await syncContacts(batch, crm, quietLogger()).catch((e) => e);
    expect(error).toBeInstanceOf(SyncError);
    expect(error.failedIds).toEqual(['b2', 'd4']);
    expect(error.message).toBe('2 of 4 contacts failed to sync');
  });

  test('rejects when the only contact in the batch fails', async () => {
    const crm = { upsert: jest.fn().mockRejectedValue(new Error('invalid email')) };
    await expect(syncContacts([{ id: 'x9', email: 'not-an-email' }], crm, quietLogger())).rejects.toMatchObject({
      name: 'SyncError',
      failedIds: ['x9'],
      message: '1 of 1 contacts failed to sync',
    });
  });

  test('still upserts the other contacts when one fails, then rejects', async () => {
    const crm = { upsert: failingFor(['a1']) };
    const logger = quietLogger();
    await expect(syncContacts(batch, crm, logger)).rejects.toBeInstanceOf(SyncError);
    expect(crm.upsert).toHaveBeenCalledTimes(4);
    expect(logger.warn).toHaveBeenCalledTimes(1);
  });

  test('rejects with every id when the whole batch fails', async () => {
    const crm = { upsert: jest.fn().mockRejectedValue(new Error('CRM maintenance window')) };
    const error = await syncContacts(batch.slice(1), crm, quietLogger()).then(
      () => null,
      (e) => e,
    );
    expect(error).not.toBeNull();
    expect(error.failedIds).toEqual(['b2', 'c3', 'd4']);
  });
});
