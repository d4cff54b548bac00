// Inboxes under an inbound capability (docs/api.md §4.5): the row and its default mailboxes, created in
// one transaction, and the storage counters. The mail itself goes through storage/pg/mail-store.ts.
import { randomUUID } from 'node:crypto';
import type { Mailbox } from '../../mail/mail-store.js';
import { isPgError, PG_UNIQUE_VIOLATION, type Db, type Queryable } from './client.js';
import { insertDefaultMailboxes } from './mail-store.js';

export type InboxType = 'individual' | 'group';

export interface Inbox {
  id: string;
  capabilityId: string;
  localpart: string;
  type: InboxType;
  storageLimitBytes: number;
  usedBytes: number;
  billingStartedAt: Date | null;
  deletedAt: Date | null;
  createdAt: Date;
}

export interface NewInbox {
  capabilityId: string;
  localpart: string;
  type: InboxType;
  passwordHash: string | null;
  initialPasswordSealed: string | null;
  now: Date;
}

const INBOX = `id, capability_id AS "capabilityId", localpart, type, storage_limit_bytes AS "storageLimitBytes",
  used_bytes AS "usedBytes", billing_started_at AS "billingStartedAt", deleted_at AS "deletedAt",
  created_at AS "createdAt"`;

/** The inbox and its five default mailboxes; null when a live inbox of that localpart exists (any case). */
export async function createInbox(db: Db, n: NewInbox): Promise<{ inbox: Inbox; mailboxes: Mailbox[] } | null> {
  try {
    return await db.tx(async (q) => {
      const [inbox] = await q.query<Inbox>(
        `INSERT INTO inboxes (id, capability_id, localpart, type, password_hash, initial_password_sealed, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${INBOX}`,
        [randomUUID(), n.capabilityId, n.localpart, n.type, n.passwordHash, n.initialPasswordSealed, n.now],
      );
      if (!inbox) throw new Error('inbox insert returned no row');
      return { inbox, mailboxes: await insertDefaultMailboxes(q, inbox.id, n.now) };
    });
  } catch (err) {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) return null;
    throw err;
  }
}

export async function findInbox(q: Queryable, id: string): Promise<Inbox | null> {
  const rows = await q.query<Inbox>(`SELECT ${INBOX} FROM inboxes WHERE id = $1`, [id]);
  return rows[0] ?? null;
}
