// The mailbox-level operations the IMAP server needs beyond storage/pg/mail-store.ts: the folder tree
// (create with superiors, delete, rename with inferiors, subscriptions), the numbers SELECT and STATUS
// report, quota, and COPY/MOVE as new rows naming the same blob, in one transaction.
//
// Locks keep mail-store.ts's order: mailbox rows (several in id order), then the inbox row. Blob
// references follow mail/blob-store.ts: taken before the commit that needs them, given back after the
// rows that held them are gone.
import { randomUUID } from 'node:crypto';
import type { BlobStore } from '../../mail/blob-store.js';
import type { ChangeNotice, Mailbox } from '../../mail/mail-store.js';
import type { Db, Queryable } from './client.js';
import type { ChangeFeedWriter } from './change-feed.js';

const MAILBOX = `id, inbox_id AS "inboxId", name, special_use AS "specialUse", uid_validity AS "uidValidity",
  uid_next AS "uidNext", highest_modseq AS "highestModseq", subscribed`;

export interface ImapStoreDeps {
  db: Db;
  blobs: BlobStore;
  feed: ChangeFeedWriter;
  onError?: (err: unknown) => void;
}

export async function mailboxByName(q: Queryable, inboxId: string, name: string): Promise<Mailbox | null> {
  const rows = await q.query<Mailbox>(`SELECT ${MAILBOX} FROM mailboxes WHERE inbox_id = $1 AND name = $2`, [
    inboxId,
    name,
  ]);
  return rows[0] ?? null;
}

export async function mailboxById(q: Queryable, mailboxId: string): Promise<Mailbox | null> {
  const rows = await q.query<Mailbox>(`SELECT ${MAILBOX} FROM mailboxes WHERE id = $1`, [mailboxId]);
  return rows[0] ?? null;
}

/** The UIDs of a mailbox, ascending: the sequence-number map of a SELECT (RFC 3501 §2.3.1.2). */
export async function mailboxUids(q: Queryable, mailboxId: string): Promise<number[]> {
  const rows = await q.query<{ uid: number }>('SELECT uid FROM mail_messages WHERE mailbox_id = $1 ORDER BY uid', [
    mailboxId,
  ]);
  return rows.map((r) => Number(r.uid));
}

/** What FETCH and SEARCH read of a message row (imap/store-backend.ts), without the columns they never use. */
export interface ImapMessageRow {
  uid: number;
  modseq: number;
  flags: string[];
  /** The internal date as milliseconds since the epoch (a number parses faster than a timestamp). */
  internalMs: number;
  size: number;
  prefix: Buffer;
  blobAddress: string;
  /** The stored MIME tree's top-level header length (structure.body.bodyStart); null without a tree. */
  headerEnd: number | null;
  /** The stored MIME tree as JSON text, parsed by the caller only if it needs it; null when not asked. */
  structure: string | null;
}

/**
 * The rows of `uids` (ascending), only those changed after `changedSince` when given, the MIME tree only
 * with `tree`: decoding 10,000 trees costs more than serving 10,000 headers does, and a FETCH of
 * flags, sizes, BODY[] or BODY[HEADER] needs only the header's length, which Postgres reads out of it.
 */
export async function imapMessageRows(
  q: Queryable,
  mailboxId: string,
  uids: readonly number[],
  opts: { changedSince: number | null; tree: boolean },
): Promise<ImapMessageRow[]> {
  if (!uids.length) return [];
  // The bounds let Postgres walk the (mailbox_id, uid) index over the page's range alone: with `= ANY` only,
  // it may read every row of the mailbox for each page. A page without gaps (FETCH 1:*) is that range and
  // nothing else: no list of UIDs to send and compare.
  const low = uids[0]!;
  const high = uids[uids.length - 1]!;
  const set = uids.length === high - low + 1 ? null : uids;
  const rows = await q.query<ImapMessageRow>(
    `SELECT uid, modseq, flags, trunc(extract(epoch FROM internal_date) * 1000)::float8 AS "internalMs", size,
       prefix, blob_address AS "blobAddress", header_end AS "headerEnd",
       CASE WHEN $4::boolean THEN structure::text END AS structure
     FROM mail_messages
     WHERE mailbox_id = $1 AND uid BETWEEN $5 AND $6 AND ($2::bigint[] IS NULL OR uid = ANY($2::bigint[]))
       AND ($3::bigint IS NULL OR modseq > $3::bigint)
     ORDER BY uid`,
    [mailboxId, set, opts.changedSince, opts.tree, low, high],
  );
  for (const r of rows) {
    // pg returns bytea as a Buffer, PGlite as a Uint8Array.
    const p = r.prefix as Uint8Array;
    if (!Buffer.isBuffer(p)) r.prefix = Buffer.from(p.buffer, p.byteOffset, p.byteLength);
  }
  return rows;
}

/** Fields of the stored envelope (mail/mime-header.ts Envelope) that hold a header's text as written. */
export type EnvelopeTextField = 'subject' | 'date' | 'messageId' | 'inReplyTo';

/**
 * The UIDs among `uids` whose stored envelope field may contain `needle` (ASCII), compared without
 * regard to case: a superset of the matches, for SEARCH to test exactly (imap/search-eval.ts). A field
 * holding encoded words (RFC 2047) or 8-bit text is always kept, since its decoded form may match; a
 * row without a stored envelope is kept too. `matched` are those Postgres decided alone: a plain ASCII
 * field without encoded words that contains the needle, which is exactly what search-eval's `contains`
 * would find (ILIKE and toLowerCase agree on ASCII).
 */
export async function envelopeCandidates(
  q: Queryable,
  mailboxId: string,
  uids: readonly number[],
  field: EnvelopeTextField,
  needle: string,
): Promise<{ candidates: number[]; matched: number[] }> {
  if (!uids.length) return { candidates: [], matched: [] };
  const pattern = `%${needle.replace(/[\\%_]/g, '\\$&')}%`;
  // `uids` ascending: a dense set (SEARCH over the whole mailbox) is read as its range and filtered here,
  // instead of sending thousands of UIDs for Postgres to compare every row with.
  const low = uids[0]!;
  const high = uids[uids.length - 1]!;
  const dense = uids.length * 2 >= high - low + 1;
  const set = dense ? null : uids;
  // The Subject has a column of its own (migration 0021): a plain one is decided by ILIKE there, and only a
  // row without one (no envelope, no subject, or one whose decoded form may differ) looks into the jsonb.
  const rows =
    field === 'subject'
      ? await q.query<{ uid: number; sure: boolean }>(
          `SELECT uid, subject_plain IS NOT NULL AS sure FROM mail_messages
           WHERE mailbox_id = $1 AND uid BETWEEN $2 AND $3 AND ($4::bigint[] IS NULL OR uid = ANY($4::bigint[]))
             AND (subject_plain ILIKE $5
               OR (subject_plain IS NULL AND (envelope IS NULL OR envelope->>'subject' IS NOT NULL)))
           ORDER BY uid`,
          [mailboxId, low, high, set, pattern],
        )
      : await q.query<{ uid: number; sure: boolean }>(
          `SELECT uid, (envelope IS NOT NULL AND v NOT LIKE '%=?%' AND v !~ '[^\\x01-\\x7e]') AS sure
           FROM (SELECT uid, envelope, envelope->>$5 AS v FROM mail_messages
             WHERE mailbox_id = $1 AND uid BETWEEN $2 AND $3 AND ($4::bigint[] IS NULL OR uid = ANY($4::bigint[]))) m
           WHERE envelope IS NULL OR v ILIKE $6 OR v LIKE '%=?%' OR v ~ '[^\\x01-\\x7e]'
           ORDER BY uid`,
          [mailboxId, low, high, set, field, pattern],
        );
  const wanted = dense ? new Set(uids) : null;
  const candidates: number[] = [];
  const matched: number[] = [];
  for (const r of rows) {
    const uid = Number(r.uid);
    if (wanted && !wanted.has(uid)) continue;
    candidates.push(uid);
    if (r.sure) matched.push(uid);
  }
  return { candidates, matched };
}

/**
 * RFC 3501 §2.3.2: the UID above which messages are still \Recent to whoever selects the mailbox next. With
 * `claim` (a read-write SELECT) this session takes them: the mark moves to uid_next - 1 in the same statement,
 * so two sessions selecting at once never both get the same message as recent (docs/decisions.md #51).
 */
export async function recentAfter(q: Queryable, mailboxId: string, claim: boolean): Promise<number> {
  const rows = claim
    ? await q.query<{ after: number }>(
        `UPDATE mailboxes m SET recent_uid = GREATEST(m.recent_uid, m.uid_next - 1)
         FROM (SELECT recent_uid FROM mailboxes WHERE id = $1 FOR UPDATE) old WHERE m.id = $1
         RETURNING old.recent_uid AS after`,
        [mailboxId],
      )
    : await q.query<{ after: number }>('SELECT recent_uid AS after FROM mailboxes WHERE id = $1', [mailboxId]);
  return Number(rows[0]?.after ?? 0);
}

export interface MailboxCounts {
  messages: number;
  unseen: number;
  size: number;
  /** The lowest UID without \Seen (RFC 3501 §6.3.1 UNSEEN names its sequence number). */
  firstUnseenUid: number | null;
  /** Keywords set on some message, for FLAGS (RFC 3501 §7.2.6). */
  keywords: string[];
}

export async function mailboxCounts(q: Queryable, mailboxId: string): Promise<MailboxCounts> {
  const [row] = await q.query<{ messages: number; unseen: number; size: number; first: number | null }>(
    `SELECT count(*) AS messages, count(*) FILTER (WHERE NOT '\\Seen' = ANY(flags)) AS unseen,
       coalesce(sum(size), 0) AS size, min(uid) FILTER (WHERE NOT '\\Seen' = ANY(flags)) AS first
     FROM mail_messages WHERE mailbox_id = $1`,
    [mailboxId],
  );
  const kw = await q.query<{ k: string }>(
    // Keywords only: a system flag starts with a backslash (chr(92); a LIKE pattern would need it escaped twice).
    `SELECT DISTINCT k FROM mail_messages, unnest(flags) AS k WHERE mailbox_id = $1 AND left(k, 1) <> chr(92)
     ORDER BY k`,
    [mailboxId],
  );
  return {
    messages: Number(row?.messages ?? 0),
    unseen: Number(row?.unseen ?? 0),
    size: Number(row?.size ?? 0),
    firstUnseenUid: row?.first == null ? null : Number(row.first),
    keywords: kw.map((r) => r.k),
  };
}

/**
 * Creates `name` and any superior it lacks (RFC 3501 §6.3.3: the server SHOULD create the superiors).
 * Names are full paths with "/" between levels. False when `name` itself exists.
 */
export async function createMailboxPath(db: Db, inboxId: string, name: string, now: Date): Promise<boolean> {
  const levels = name.split('/');
  return db.tx(async (q) => {
    let created = false;
    for (let i = 1; i <= levels.length; i++) {
      const path = levels.slice(0, i).join('/');
      const rows = await q.query(
        `INSERT INTO mailboxes (id, inbox_id, name, created_at) VALUES ($1, $2, $3, $4)
         ON CONFLICT DO NOTHING RETURNING id`,
        [randomUUID(), inboxId, path, now],
      );
      if (i === levels.length) created = rows.length > 0;
    }
    return created;
  });
}

/** The mailbox's inferiors exist: `name/…`. */
export async function hasInferiors(q: Queryable, inboxId: string, name: string): Promise<boolean> {
  const rows = await q.query('SELECT 1 FROM mailboxes WHERE inbox_id = $1 AND starts_with(name, $2) LIMIT 1', [
    inboxId,
    `${name}/`,
  ]);
  return rows.length > 0;
}

/**
 * Deletes a mailbox with its messages (RFC 3501 §6.3.4), giving their bytes back to the inbox and their
 * blob references back after the commit. Sessions that have it selected are woken and find it gone.
 */
export async function deleteMailbox(deps: ImapStoreDeps, mailboxId: string): Promise<boolean> {
  let notice: ChangeNotice | null = null;
  const released = await deps.db.tx(async (q) => {
    const [mb] = await q.query<{ inboxId: string; highestModseq: number }>(
      `SELECT inbox_id AS "inboxId", highest_modseq AS "highestModseq" FROM mailboxes WHERE id = $1 FOR UPDATE`,
      [mailboxId],
    );
    if (!mb) return null;
    const gone = await q.query<{ size: number; blobAddress: string }>(
      'DELETE FROM mail_messages WHERE mailbox_id = $1 RETURNING size, blob_address AS "blobAddress"',
      [mailboxId],
    );
    const bytes = gone.reduce((n, g) => n + Number(g.size), 0);
    if (bytes > 0) await q.query('UPDATE inboxes SET used_bytes = used_bytes - $2 WHERE id = $1', [mb.inboxId, bytes]);
    await q.query('DELETE FROM mailboxes WHERE id = $1', [mailboxId]);
    notice = { inboxId: mb.inboxId, mailboxId, modseq: Number(mb.highestModseq) + 1 };
    await deps.feed.notifyIn(q, notice);
    return gone.map((g) => g.blobAddress);
  });
  if (!released) return false;
  await releaseAll(deps, released);
  if (notice) deps.feed.publish(notice);
  return true;
}

async function releaseAll(deps: ImapStoreDeps, addresses: readonly string[]): Promise<void> {
  const counts = new Map<string, number>();
  for (const a of addresses) counts.set(a, (counts.get(a) ?? 0) + 1);
  for (const [address, n] of counts) await deps.blobs.release(address, n).catch(deps.onError ?? (() => {}));
}

export type RenameOutcome = 'renamed' | 'nonexistent' | 'exists';

/**
 * RFC 3501 §6.3.5: renames `from` and every `from/…` to `to` and `to/…`, creating superiors of `to` that
 * are missing, in one transaction. The mailboxes keep their ids, UIDs and UIDVALIDITY.
 */
export async function renameMailboxTree(
  db: Db,
  inboxId: string,
  from: string,
  to: string,
  now: Date,
): Promise<RenameOutcome> {
  return db.tx(async (q) => {
    const moving = await q.query<{ id: string; name: string }>(
      `SELECT id, name FROM mailboxes WHERE inbox_id = $1 AND (name = $2 OR starts_with(name, $3)) FOR UPDATE`,
      [inboxId, from, `${from}/`],
    );
    if (!moving.some((m) => m.name === from)) return 'nonexistent';
    const targets = moving.map((m) => ({ id: m.id, name: to + m.name.slice(from.length) }));
    const clash = await q.query('SELECT 1 FROM mailboxes WHERE inbox_id = $1 AND name = ANY($2::text[]) LIMIT 1', [
      inboxId,
      targets.map((t) => t.name),
    ]);
    if (clash.length) return 'exists';
    // Two steps, so that renaming a/b to a/b/c (or a to a/x swaps) never trips the unique index midway.
    for (const t of targets)
      await q.query("UPDATE mailboxes SET name = '\x01rename ' || id::text WHERE id = $1", [t.id]);
    for (const t of targets) await q.query('UPDATE mailboxes SET name = $2 WHERE id = $1', [t.id, t.name]);
    const levels = to.split('/');
    for (let i = 1; i < levels.length; i++) {
      await q.query(
        `INSERT INTO mailboxes (id, inbox_id, name, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
        [randomUUID(), inboxId, levels.slice(0, i).join('/'), now],
      );
    }
    return 'renamed';
  });
}

export async function setSubscribed(
  q: Queryable,
  inboxId: string,
  name: string,
  subscribed: boolean,
): Promise<boolean> {
  const rows = await q.query('UPDATE mailboxes SET subscribed = $3 WHERE inbox_id = $1 AND name = $2 RETURNING id', [
    inboxId,
    name,
    subscribed,
  ]);
  return rows.length > 0;
}

export interface InboxQuota {
  usedBytes: number;
  limitBytes: number;
  messages: number;
}

export async function inboxQuota(q: Queryable, inboxId: string): Promise<InboxQuota | null> {
  const rows = await q.query<InboxQuota>(
    `SELECT used_bytes AS "usedBytes", storage_limit_bytes AS "limitBytes",
       (SELECT count(*) FROM mail_messages m WHERE m.inbox_id = i.id) AS messages
     FROM inboxes i WHERE id = $1 AND deleted_at IS NULL`,
    [inboxId],
  );
  const r = rows[0];
  return r ? { usedBytes: Number(r.usedBytes), limitBytes: Number(r.limitBytes), messages: Number(r.messages) } : null;
}

export type CopyOutcome =
  | { kind: 'copied'; uidValidity: number; source: number[]; dest: number[] }
  | { kind: 'over_quota' }
  | { kind: 'no_mailbox' };

/**
 * COPY (RFC 3501 §6.4.7) and MOVE (RFC 6851 §3.3): the messages `uids` of `fromId` get new rows in `toId`
 * naming the same blobs, flags kept, UIDs allocated in one row-locked step in source UID order. A copy
 * takes a blob reference per row and counts toward storage (refused past the limit when `enforceLimit`);
 * a move deletes the source rows in the same transaction, so its references and bytes carry over.
 */
export async function copyMessages(
  deps: ImapStoreDeps,
  a: { fromId: string; toId: string; uids: readonly number[]; move: boolean; enforceLimit: boolean; now: Date },
): Promise<CopyOutcome> {
  const { db, blobs, feed } = deps;
  // References first (a copy only): read which blobs, take one per row, give back if the copy fails.
  let taken: string[] = [];
  if (!a.move) {
    const rows = await db.query<{ blobAddress: string }>(
      'SELECT blob_address AS "blobAddress" FROM mail_messages WHERE mailbox_id = $1 AND uid = ANY($2::bigint[])',
      [a.fromId, [...a.uids]],
    );
    taken = rows.map((r) => r.blobAddress);
    const counts = new Map<string, number>();
    for (const t of taken) counts.set(t, (counts.get(t) ?? 0) + 1);
    const done: [string, number][] = [];
    try {
      for (const [address, n] of counts) {
        await blobs.addRef(address, n);
        done.push([address, n]);
      }
    } catch (err) {
      for (const [address, n] of done) await blobs.release(address, n).catch(deps.onError ?? (() => {}));
      throw err;
    }
  }
  const notices: ChangeNotice[] = [];
  let outcome: CopyOutcome;
  let surplus: string[] = taken;
  try {
    outcome = await db.tx(async (q): Promise<CopyOutcome> => {
      const locked = await q.query<{ id: string; inboxId: string; highestModseq: number }>(
        `SELECT id, inbox_id AS "inboxId", highest_modseq AS "highestModseq" FROM mailboxes
         WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`,
        [[a.fromId, a.toId]],
      );
      const from = locked.find((m) => m.id === a.fromId);
      const to = locked.find((m) => m.id === a.toId);
      if (!from || !to || from.inboxId !== to.inboxId) return { kind: 'no_mailbox' };
      const src = await q.query<{ uid: number; size: number }>(
        'SELECT uid, size FROM mail_messages WHERE mailbox_id = $1 AND uid = ANY($2::bigint[]) ORDER BY uid',
        [a.fromId, [...a.uids]],
      );
      const [target] = await q.query<{ uidValidity: number }>(
        'SELECT uid_validity AS "uidValidity" FROM mailboxes WHERE id = $1',
        [a.toId],
      );
      if (!src.length) return { kind: 'copied', uidValidity: Number(target?.uidValidity), source: [], dest: [] };
      const n = src.length;
      const [alloc] = await q.query<{ first: number; modseq: number; uidValidity: number }>(
        `UPDATE mailboxes SET uid_next = uid_next + $2, highest_modseq = highest_modseq + 1 WHERE id = $1
         RETURNING uid_next - $2 AS first, highest_modseq AS modseq, uid_validity AS "uidValidity"`,
        [a.toId, n],
      );
      if (!alloc) return { kind: 'no_mailbox' };
      if (!a.move) {
        const bytes = src.reduce((s, r) => s + Number(r.size), 0);
        const ok = await q.query(
          `UPDATE inboxes SET used_bytes = used_bytes + $2
           WHERE id = $1 AND deleted_at IS NULL AND (NOT $3::boolean OR used_bytes + $2 <= storage_limit_bytes)
           RETURNING id`,
          [to.inboxId, bytes, a.enforceLimit],
        );
        if (!ok.length) return { kind: 'over_quota' };
      }
      const source = src.map((r) => Number(r.uid));
      const dest = source.map((_, i) => Number(alloc.first) + i);
      const pairs = JSON.stringify(source.map((s, i) => ({ s, d: dest[i] })));
      if (a.move) {
        // A moved message is the same row under its new mailbox and UID: its id, import key
        // (docs/decisions.md #20), blob reference and bytes stay as they are.
        await q.query(
          `UPDATE mail_messages m SET mailbox_id = $2, uid = p.d, modseq = $4
           FROM jsonb_to_recordset($3::text::jsonb) AS p(s bigint, d bigint)
           WHERE m.mailbox_id = $1 AND m.uid = p.s`,
          [a.fromId, a.toId, pairs, alloc.modseq],
        );
      } else {
        // A copy is not an import: it has no import key, so the key stays unique per inbox.
        await q.query(
          `INSERT INTO mail_messages (id, inbox_id, mailbox_id, uid, modseq, blob_address, prefix, size,
             internal_date, flags, message_id, envelope, structure, import_key, created_at)
           SELECT gen_random_uuid(), m.inbox_id, $2, p.d, $4, m.blob_address, m.prefix, m.size, m.internal_date,
             m.flags, m.message_id, m.envelope, m.structure, NULL, $5
           FROM mail_messages m JOIN jsonb_to_recordset($3::text::jsonb) AS p(s bigint, d bigint) ON p.s = m.uid
           WHERE m.mailbox_id = $1`,
          [a.fromId, a.toId, pairs, alloc.modseq, a.now],
        );
      }
      await q.query(
        `INSERT INTO mail_changes (mailbox_id, modseq, uid, kind, created_at)
         SELECT $1, $2, u, 'append', $4 FROM unnest($3::bigint[]) AS u`,
        [a.toId, alloc.modseq, dest, a.now],
      );
      notices.push({ inboxId: to.inboxId, mailboxId: a.toId, modseq: Number(alloc.modseq) });
      if (a.move) {
        const modseq = Number(from.highestModseq) + (a.fromId === a.toId ? 2 : 1);
        await q.query('UPDATE mailboxes SET highest_modseq = $2 WHERE id = $1', [a.fromId, modseq]);
        await q.query(
          `INSERT INTO mail_changes (mailbox_id, modseq, uid, kind, created_at)
           SELECT $1, $2, u, 'expunge', $4 FROM unnest($3::bigint[]) AS u`,
          [a.fromId, modseq, source, a.now],
        );
        notices.push({ inboxId: from.inboxId, mailboxId: a.fromId, modseq });
      }
      for (const notice of notices) await feed.notifyIn(q, notice);
      return { kind: 'copied', uidValidity: Number(alloc.uidValidity), source, dest };
    });
    if (outcome.kind === 'copied') surplus = [];
  } finally {
    await releaseAll(deps, surplus);
  }
  for (const notice of notices) if (outcome.kind === 'copied') feed.publish(notice);
  return outcome;
}
