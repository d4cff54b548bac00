// Inboxes under an inbound capability (docs/api.md §4.5): the row and its default mailboxes, created in
// one transaction, and the storage counters. The mail itself goes through storage/pg/mail-store.ts.
import { randomUUID } from 'node:crypto';
import type { Mailbox } from '../../mail/mail-store.js';
import { isPgError, PG_UNIQUE_VIOLATION, type Db, type Queryable } from './client.js';
import { insertDefaultMailboxes } from './mail-store.js';
import type { ChangeFeedWriter } from './change-feed.js';
import { inboxNotice } from '../../mail/mail-store.js';
import { isUuid } from '../../mail/uuid.js';

export type InboxType = 'individual' | 'group';

export interface Inbox {
  id: string;
  /** Null only for a deleted inbox whose capability was removed after it (docs/decisions.md #50). */
  capabilityId: string | null;
  localpart: string;
  type: InboxType;
  storageLimitBytes: number;
  usedBytes: number;
  billingStartedAt: Date | null;
  deletedAt: Date | null;
  createdAt: Date;
}

export interface NewInbox {
  /** The row's id when the caller needs it beforehand (a sealed value bound to the row); else a new one. */
  id?: string;
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
      // The project and domain are the capability's, kept on the row so that it outlives the capability.
      const [inbox] = await q.query<Inbox>(
        `INSERT INTO inboxes (id, capability_id, localpart, type, password_hash, initial_password_sealed, created_at,
           project_id, domain)
         SELECT $1, c.id, $3, $4, $5, $6, $7, c.project_id, c.domain FROM inbound_capabilities c WHERE c.id = $2
         RETURNING ${INBOX}`,
        [n.id ?? randomUUID(), n.capabilityId, n.localpart, n.type, n.passwordHash, n.initialPasswordSealed, n.now],
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

// ---- the inbox routes of docs/api.md §4.5 (core/inboxes.ts) and inbox billing (core/usage.ts) --------------

/** A live inbox as the listing shows it: the initial password still sealed, null after the first login. */
export interface ListedInbox extends Inbox {
  initialPasswordSealed: string | null;
}

/** Live inboxes of a capability, oldest first. */
export async function listLiveInboxes(q: Queryable, capabilityId: string): Promise<ListedInbox[]> {
  return q.query<ListedInbox>(
    `SELECT ${INBOX}, initial_password_sealed AS "initialPasswordSealed" FROM inboxes
     WHERE capability_id = $1 AND deleted_at IS NULL ORDER BY created_at, id`,
    [capabilityId],
  );
}

/** The live inbox of that id on that capability, or null. */
export async function findLiveInbox(q: Queryable, capabilityId: string, inboxId: string): Promise<Inbox | null> {
  if (!isUuid(inboxId)) return null;
  const rows = await q.query<Inbox>(
    `SELECT ${INBOX} FROM inboxes WHERE id = $1 AND capability_id = $2 AND deleted_at IS NULL`,
    [inboxId, capabilityId],
  );
  return rows[0] ?? null;
}

/** Sets the storage limit of a live inbox; null when it is gone. */
export async function setStorageLimit(
  q: Queryable,
  inboxId: string,
  limitBytes: number,
): Promise<{ usedBytes: number; limitBytes: number } | null> {
  const rows = await q.query<{ usedBytes: number; limitBytes: number }>(
    `UPDATE inboxes SET storage_limit_bytes = $2 WHERE id = $1 AND deleted_at IS NULL
     RETURNING used_bytes AS "usedBytes", storage_limit_bytes AS "limitBytes"`,
    [inboxId, limitBytes],
  );
  return rows[0] ?? null;
}

/**
 * Moves a live inbox's credentials (mail/mail-store.ts, "Inbox notices"): `change` runs in the transaction
 * that bumps credentials_version, the inbox notice goes out at its commit. False when the inbox is gone.
 */
async function changeCredentials(
  db: Db,
  feed: ChangeFeedWriter,
  inboxId: string,
  change: (q: Queryable) => Promise<unknown[]>,
): Promise<boolean> {
  const notice = inboxNotice(inboxId);
  const changed = await db.tx(async (q) => {
    if (!(await change(q)).length) return false;
    await feed.notifyIn(q, notice);
    return true;
  });
  if (changed) feed.publish(notice);
  return changed;
}

/** A new password for a live inbox: every session of the old one ends (the listing's initial password stays). */
export function setInboxPassword(db: Db, feed: ChangeFeedWriter, inboxId: string, passwordHash: string) {
  return changeCredentials(db, feed, inboxId, (q) =>
    q.query(
      `UPDATE inboxes SET password_hash = $2, credentials_version = credentials_version + 1
       WHERE id = $1 AND deleted_at IS NULL RETURNING id`,
      [inboxId, passwordHash],
    ),
  );
}

/**
 * docs/api.md §3: soft-deletes a live inbox. Its address is free at once (the live-localpart index skips it),
 * it can no longer log in (no password, a new credentials version), the MX and appends find it gone, and its
 * billing dates stay. Its mail is purged afterwards by the caller, through the mail store.
 */
export function softDeleteInbox(db: Db, feed: ChangeFeedWriter, inboxId: string, now: Date) {
  return changeCredentials(db, feed, inboxId, (q) =>
    q.query(
      `UPDATE inboxes SET deleted_at = $2, password_hash = NULL, initial_password_sealed = NULL,
         credentials_version = credentials_version + 1
       WHERE id = $1 AND deleted_at IS NULL RETURNING id`,
      [inboxId, now],
    ),
  );
}

/** What a session checks when an inbox notice wakes it: the credentials version, and whether the inbox lives. */
export async function inboxCredentials(
  q: Queryable,
  inboxId: string,
): Promise<{ credentialsVersion: number; deleted: boolean } | null> {
  if (!isUuid(inboxId)) return null;
  const rows = await q.query<{ credentialsVersion: number; deleted: boolean }>(
    `SELECT credentials_version AS "credentialsVersion", deleted_at IS NOT NULL AS deleted FROM inboxes WHERE id = $1`,
    [inboxId],
  );
  return rows[0] ?? null;
}

/**
 * Deleted inboxes that still hold mail: a purge that was interrupted (a crash between the soft delete and
 * the last expunge), which the sweep finishes (docs/decisions.md #50).
 */
export async function unpurgedInboxes(q: Queryable, limit: number): Promise<string[]> {
  const rows = await q.query<{ id: string }>(
    `SELECT i.id FROM inboxes i WHERE i.deleted_at IS NOT NULL
       AND EXISTS (SELECT 1 FROM mail_messages m WHERE m.inbox_id = i.id) LIMIT $1`,
    [limit],
  );
  return rows.map((r) => r.id);
}

/** The ids of a capability's inboxes, live and deleted (what removing the capability retires). */
export async function inboxIdsOfCapabilities(q: Queryable, capabilityIds: string[]): Promise<string[]> {
  const rows = await q.query<{ id: string }>('SELECT id FROM inboxes WHERE capability_id = ANY($1::uuid[])', [
    capabilityIds,
  ]);
  return rows.map((r) => r.id);
}

/** The UIDs of every message of an inbox, per mailbox (what a purge expunges). */
export async function inboxMessageUids(
  q: Queryable,
  inboxId: string,
): Promise<{ mailboxId: string; uids: number[] }[]> {
  const rows = await q.query<{ mailboxId: string; uids: (number | string)[] }>(
    `SELECT mailbox_id AS "mailboxId", array_agg(uid ORDER BY uid) AS uids FROM mail_messages
     WHERE inbox_id = $1 GROUP BY mailbox_id`,
    [inboxId],
  );
  // pg parses int8 but not int8[] (PGlite does both): the elements may arrive as text.
  return rows.map((r) => ({ mailboxId: r.mailboxId, uids: r.uids.map(Number) }));
}

/**
 * docs/decisions.md #20: which of these messages are already in the inbox, whichever way they came in: by
 * import key, by Message-ID, or (for a message without one) by the SHA-256 of its body, which is its blob
 * address. Answers the matching rows' keys; the import's unique index settles races (storage/pg/mail-store.ts).
 */
export async function messagesPresent(
  q: Queryable,
  inboxId: string,
  look: { importKeys: string[]; messageIds: string[]; blobAddresses: string[] },
): Promise<{ importKey: string | null; messageId: string | null; blobAddress: string }[]> {
  return q.query(
    `SELECT import_key AS "importKey", message_id AS "messageId", blob_address AS "blobAddress" FROM mail_messages
     WHERE inbox_id = $1 AND (import_key = ANY($2::text[]) OR message_id = ANY($3::text[])
       OR (message_id IS NULL AND blob_address = ANY($4::text[])))`,
    [inboxId, look.importKeys, look.messageIds, look.blobAddresses],
  );
}

/**
 * The inboxes an organization is billed for this month (docs/decisions.md #18): live ones, and those deleted
 * since `monthStart` (also those whose capability is gone since, docs/decisions.md #50), in one query.
 */
export async function billedInboxesOfOrganization(
  q: Queryable,
  organizationId: string,
  monthStart: Date,
): Promise<{ billingStartedAt: Date | null; deletedAt: Date | null; limitBytes: number }[]> {
  return q.query(
    `SELECT i.billing_started_at AS "billingStartedAt", i.deleted_at AS "deletedAt",
       i.storage_limit_bytes AS "limitBytes"
     FROM inboxes i JOIN projects p ON p.id = i.project_id
     WHERE p.organization_id = $1 AND (i.deleted_at IS NULL OR i.deleted_at >= $2)`,
    [organizationId, monthStart],
  );
}
