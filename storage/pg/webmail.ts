// The SQL of the webmail (core/webmail.ts): sessions, folder counts, one page of a folder with its search,
// a message of one inbox by id, and what decides whether the inbox may send. An inbox row carries its
// project and domain (migration 0011), so none of these joins its capability. Every read of a message or a
// folder names the inbox too, so a session can only ever reach its own.
import type { Mailbox, StoredMessage } from '../../mail/mail-store.js';
import { isUuid } from '../../mail/uuid.js';
import type { Queryable } from './client.js';

export interface WebmailSessionRow {
  inboxId: string;
  address: string;
  credentialsVersion: number;
  csrfToken: string;
  expiresAt: Date;
}

export async function insertWebmailSession(
  q: Queryable,
  s: { tokenHash: string; inboxId: string; credentialsVersion: number; csrfToken: string; now: Date; expiresAt: Date },
): Promise<void> {
  await q.query(
    `INSERT INTO webmail_sessions (token_hash, inbox_id, credentials_version, csrf_token, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6)`,
    [s.tokenHash, s.inboxId, s.credentialsVersion, s.csrfToken, s.now, s.expiresAt],
  );
}

/**
 * The live session of a token hash: unexpired, its inbox not deleted and at the credentials version the
 * session signed in with. Null otherwise (a stale row is left for the sweep).
 */
export async function findWebmailSession(
  q: Queryable,
  tokenHash: string,
  now: Date,
): Promise<WebmailSessionRow | null> {
  const rows = await q.query<WebmailSessionRow>(
    `SELECT s.inbox_id AS "inboxId", i.localpart || '@' || i.domain AS address,
       s.credentials_version AS "credentialsVersion", s.csrf_token AS "csrfToken", s.expires_at AS "expiresAt"
     FROM webmail_sessions s JOIN inboxes i ON i.id = s.inbox_id
     WHERE s.token_hash = $1 AND s.expires_at > $2 AND i.deleted_at IS NULL
       AND i.credentials_version = s.credentials_version`,
    [tokenHash, now],
  );
  return rows[0] ?? null;
}

/** Slides the session's expiry forward (called at most every few minutes per session). */
export async function extendWebmailSession(q: Queryable, tokenHash: string, expiresAt: Date): Promise<void> {
  await q.query('UPDATE webmail_sessions SET expires_at = $2 WHERE token_hash = $1', [tokenHash, expiresAt]);
}

export async function deleteWebmailSession(q: Queryable, tokenHash: string): Promise<void> {
  await q.query('DELETE FROM webmail_sessions WHERE token_hash = $1', [tokenHash]);
}

/** Expired sessions and those of a past credentials version. */
export async function sweepWebmailSessions(q: Queryable, now: Date): Promise<void> {
  await q.query(
    `DELETE FROM webmail_sessions s USING inboxes i
     WHERE i.id = s.inbox_id AND (s.expires_at <= $1 OR i.credentials_version <> s.credentials_version
       OR i.deleted_at IS NOT NULL)`,
    [now],
  );
}

export interface FolderRow extends Mailbox {
  total: number;
  unread: number;
}

export async function foldersWithCounts(q: Queryable, inboxId: string): Promise<FolderRow[]> {
  const rows = await q.query<FolderRow>(
    `SELECT m.id, m.inbox_id AS "inboxId", m.name, m.special_use AS "specialUse", m.uid_validity AS "uidValidity",
       m.uid_next AS "uidNext", m.highest_modseq AS "highestModseq", m.subscribed,
       count(x.id) AS total, count(x.id) FILTER (WHERE NOT '\\Seen' = ANY(x.flags)) AS unread
     FROM mailboxes m LEFT JOIN mail_messages x ON x.mailbox_id = m.id
     WHERE m.inbox_id = $1 GROUP BY m.id ORDER BY m.name`,
    [inboxId],
  );
  return rows.map((r) => ({ ...r, total: Number(r.total), unread: Number(r.unread) }));
}

const MESSAGE = `x.id, x.mailbox_id AS "mailboxId", x.uid, x.modseq, x.blob_address AS "blobAddress", x.prefix,
  x.size, x.internal_date AS "internalDate", x.flags, x.message_id AS "messageId", x.envelope, x.structure`;

/** The message `id` when it belongs to `inboxId`; null for another inbox's message or no message. */
export async function messageOfInbox(q: Queryable, inboxId: string, id: string): Promise<StoredMessage | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<StoredMessage>(
    `SELECT ${MESSAGE} FROM mail_messages x WHERE x.id = $1 AND x.inbox_id = $2`,
    [id, inboxId],
  );
  return rows[0] ?? null;
}

/** The mailbox `id` when it belongs to `inboxId`. */
export async function mailboxOfInbox(q: Queryable, inboxId: string, id: string): Promise<Mailbox | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<Mailbox>(
    `SELECT id, inbox_id AS "inboxId", name, special_use AS "specialUse", uid_validity AS "uidValidity",
       uid_next AS "uidNext", highest_modseq AS "highestModseq", subscribed
     FROM mailboxes WHERE id = $1 AND inbox_id = $2`,
    [id, inboxId],
  );
  return rows[0] ?? null;
}

/** Escapes LIKE's wildcards so that a search for "50%" means those characters. */
const likePattern = (s: string) => `%${s.replace(/[\\%_]/g, (c) => `\\${c}`)}%`;

/**
 * One page of a mailbox, newest first (by UID: the order of arrival). `search` matches the stored
 * envelope's subject and addresses (its display part, decoded) and the preview, case-insensitively.
 */
export async function messagePage(
  q: Queryable,
  mailboxId: string,
  opts: { offset: number; limit: number; search: string | null },
): Promise<{ rows: StoredMessage[]; total: number }> {
  const where = opts.search
    ? `x.mailbox_id = $1 AND (coalesce(x.structure->'display', 'null')::text || ' ' ||
         coalesce(x.structure->>'preview', '')) ILIKE $2`
    : 'x.mailbox_id = $1';
  const params: unknown[] = opts.search ? [mailboxId, likePattern(opts.search)] : [mailboxId];
  const [count] = await q.query<{ n: number }>(`SELECT count(*) AS n FROM mail_messages x WHERE ${where}`, params);
  const rows = await q.query<StoredMessage>(
    `SELECT ${MESSAGE} FROM mail_messages x WHERE ${where} ORDER BY x.uid DESC
     LIMIT ${Number(opts.limit)} OFFSET ${Number(opts.offset)}`,
    params,
  );
  return { rows, total: Number(count?.n ?? 0) };
}

/**
 * The project of the inbox (through its inbound capability) and whether its domain has a verified outbound
 * capability in that same project: what lets the webmail send from the inbox's address.
 */
export async function inboxSendingState(
  q: Queryable,
  inboxId: string,
): Promise<{
  address: string;
  domain: string;
  projectId: string;
  outboundVerified: boolean;
  outboundElsewhere: boolean;
} | null> {
  const rows = await q.query<{
    address: string;
    domain: string;
    projectId: string;
    outboundVerified: boolean;
    outboundElsewhere: boolean;
  }>(
    `SELECT i.localpart || '@' || i.domain AS address, i.domain, i.project_id AS "projectId",
       EXISTS (SELECT 1 FROM outbound_capabilities o WHERE o.domain = i.domain AND o.project_id = i.project_id
               AND o.status = 'verified') AS "outboundVerified",
       EXISTS (SELECT 1 FROM outbound_capabilities o WHERE o.domain = i.domain AND o.project_id <> i.project_id)
         AS "outboundElsewhere"
     FROM inboxes i WHERE i.id = $1 AND i.deleted_at IS NULL`,
    [inboxId],
  );
  return rows[0] ?? null;
}
