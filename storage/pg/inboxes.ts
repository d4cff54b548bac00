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

/** What the MX needs to decide a recipient (docs/api.md §6): the capability, and its live inbox if any. */
export interface InboundRecipient {
  capabilityId: string;
  /** The live inbox of that localpart on the capability, or null (an unknown localpart). */
  inbox: {
    id: string;
    usedBytes: number;
    storageLimitBytes: number;
    /** Where mail is filed: INBOX, and the \Junk mailbox (null if the user removed it). */
    inboxMailboxId: string;
    junkMailboxId: string | null;
  } | null;
}

/**
 * The verified inbound capability of `domain` and the live inbox of `localpart` on it, in one query;
 * null when no verified inbound capability has that domain. Both arguments normalized by the caller
 * (mail/localpart.ts lower case, mail/domain-names.ts), matching the lower(localpart) unique index.
 */
export async function findInboundRecipient(
  q: Queryable,
  localpart: string,
  domain: string,
): Promise<InboundRecipient | null> {
  const rows = await q.query<{
    capabilityId: string;
    inboxId: string | null;
    usedBytes: number | null;
    storageLimitBytes: number | null;
    inboxMailboxId: string | null;
    junkMailboxId: string | null;
  }>(
    `SELECT c.id AS "capabilityId", i.id AS "inboxId", i.used_bytes AS "usedBytes",
       i.storage_limit_bytes AS "storageLimitBytes",
       (SELECT m.id FROM mailboxes m WHERE m.inbox_id = i.id AND m.name = 'INBOX') AS "inboxMailboxId",
       (SELECT m.id FROM mailboxes m WHERE m.inbox_id = i.id AND m.special_use = '\\Junk'
        ORDER BY m.created_at LIMIT 1) AS "junkMailboxId"
     FROM inbound_capabilities c
     LEFT JOIN inboxes i ON i.capability_id = c.id AND lower(i.localpart) = $1 AND i.deleted_at IS NULL
     WHERE c.domain = $2 AND c.status = 'verified'`,
    [localpart, domain],
  );
  const r = rows[0];
  if (!r) return null;
  if (!r.inboxId || !r.inboxMailboxId) return { capabilityId: r.capabilityId, inbox: null };
  return {
    capabilityId: r.capabilityId,
    inbox: {
      id: r.inboxId,
      usedBytes: Number(r.usedBytes),
      storageLimitBytes: Number(r.storageLimitBytes),
      inboxMailboxId: r.inboxMailboxId,
      junkMailboxId: r.junkMailboxId,
    },
  };
}

/**
 * Sets an inbox's used bytes directly (tests and repairs: a test reaches the limit without storing a
 * gigabyte). The message rows are not touched, so the count no longer equals their sizes.
 */
export async function setUsedBytes(q: Queryable, inboxId: string, usedBytes: number): Promise<void> {
  await q.query('UPDATE inboxes SET used_bytes = $2 WHERE id = $1', [inboxId, usedBytes]);
}
