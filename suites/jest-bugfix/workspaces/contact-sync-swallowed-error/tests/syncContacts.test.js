const { syncContacts, SyncError } = require('../src/syncContacts');

const contacts = [
  { id: 'c1', email: 'ana@example.com' },
  { id: 'c2', email: 'bo@example.com' },
  { id: 'c3', email: 'cy@example.com' },
];

const quietLogger = () => ({ warn: jest.fn() });

describe('syncContacts', () => {
  test('upserts every contact and reports the count', async () => {
    const crm = { upsert: jest.fn().mockResolvedValue({ updated: true }) };
    await expect(syncContacts(contacts, crm, quietLogger())).resolves.toEqual({ synced: 3 });
    expect(crm.upsert).toHaveBeenCalledTimes(3);
    expect(crm.upsert).toHaveBeenCalledWith(contacts[1]);
  });

  test('rejects with a SyncError listing the contacts that failed', async () => {
    const crm = {
      upsert: jest.fn((contact) =>
        contact.id === 'c2' ? Promise.reject(new Error('429 Too Many Requests')) : Promise.resolve({}),
      ),
    };
    const logger = quietLogger();
    const error = await syncContacts(contacts, crm, logger).catch((e) => e);
    expect(error).toBeInstanceOf(SyncError);
    expect(error.failedIds).toEqual(['c2']);
    expect(error.message).toBe('1 of 3 contacts failed to sync');
  });

  test('logs a warning for each failed upsert', async () => {
    const crm = { upsert: jest.fn().mockRejectedValue(new Error('CRM unavailable')) };
    const logger = quietLogger();
    await syncContacts(contacts.slice(0, 1), crm, logger).catch(() => {});
    expect(logger.warn).toHaveBeenCalledWith('upsert of contact c1 failed: CRM unavailable');
  });

  test('resolves with zero for an empty batch', async () => {
    const crm = { upsert: jest.fn() };
    await expect(syncContacts([], crm, quietLogger())).resolves.toEqual({ synced: 0 });
  });
});
