// The mailbox backend over Postgres and a blob store (mail/mail-store.ts has the contract): the one place
// the MX listener, the IMAP server and the webmail API reach message rows through.
//
// Locks, always in this order so that two writers never wait on each other in a cycle: the mailbox row
// (it allocates UID and MODSEQ), then the inbox row (it counts used_bytes). Every write puts its journal
// row and its NOTIFY in the same transaction and wakes this process's subscribers after the commit.
//
// Blob references follow the rule of mail/blob-store.ts: append takes its reference before the
// transaction that commits the row, expunge gives references back after the rows are gone. Expunged rows
// are deleted, not kept as tombstones: the journal keeps (modseq, uid) for RFC 7162 VANISHED.
import { randomUUID } from 'node:crypto';
import { Buffer } from 'node:buffer';
import type { Clock } from '../../config/context.js';
import type { BlobStore } from '../../mail/blob-store.js';
import { checkBlobAddress } from '../../mail/blob-store.js';
import {
  applyFlagChange,
  DEFAULT_MAILBOXES,
  normalizeFlags,
  sameFlags,
  type AppendInput,
  type AppendOutcome,
  type Change,
  type ChangeNotice,
  type MailStore,
  type Mailbox,
  type SpecialUse,
  type StoredMessage,
} from '../../mail/mail-store.js';
import { isPgError, PG_UNIQUE_VIOLATION, type Db, type Queryable } from './client.js';
import type { ChangeFeedWriter } from './change-feed.js';
import { batched } from './batch.js';

const MAILBOX = `id, inbox_id AS "inboxId", name, special_use AS "specialUse", uid_validity AS "uidValidity",
  uid_next AS "uidNext", highest_modseq AS "highestModseq", subscribed`;
const MESSAGE = `id, mailbox_id AS "mailboxId", uid, modseq, blob_address AS "blobAddress", prefix, size,
  internal_date AS "internalDate", flags, message_id AS "messageId", envelope, structure`;

// pg returns bytea as a Buffer, PGlite as a Uint8Array.
const asBuffer = (v: Uint8Array): Buffer =>
  Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);
// JSON goes in as text cast to jsonb: both engines then pass the string through unchanged.
const json = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));

function checkUids(uids: readonly number[]): number[] {
  for (const u of uids) if (!Number.isSafeInteger(u) || u < 1) throw new RangeError(`not a UID: ${u}`);
  return [...uids];
}

// RFC 9051 §5.1: any name but INBOX (in any case, which always means the inbox itself), no control characters.
function checkMailboxName(name: string): boolean {
  return typeof name === 'string' && name.length > 0 && name.length <= 1000 && !/[\x00-\x1f\x7f]/.test(name);
}

/** Creates the default mailboxes of an inbox inside the caller's transaction (idempotent). */
export async function insertDefaultMailboxes(q: Queryable, inboxId: string, now: Date): Promise<Mailbox[]> {
  for (const m of DEFAULT_MAILBOXES) {
    await q.query(
      `INSERT INTO mailboxes (id, inbox_id, name, special_use, created_at) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT DO NOTHING`,
      [randomUUID(), inboxId, m.name, m.specialUse, now],
    );
  }
  return q.query<Mailbox>(`SELECT ${MAILBOX} FROM mailboxes WHERE inbox_id = $1 ORDER BY created_at, name`, [inboxId]);
}

// Ends an append's transaction when no input was stored: thrown so that db.tx rolls back what was allocated.
class NothingStored extends Error {}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The indexes grouped by key, the groups in key order (the lock order) and each in its first order. */
function groupBy(indexes: Iterable<number>, key: (i: number) => string): [string, number[]][] {
  const groups = new Map<string, number[]>();
  for (const i of indexes) {
    const k = key(i);
    const g = groups.get(k);
    if (g) g.push(i);
    else groups.set(k, [i]);
  }
  return [...groups.entries()].sort((a, b) => cmp(a[0], b[0]));
}

/** `($1, $2, …), (…)` for `rows` rows of `width` parameters, with a cast after some columns' (0-based). */
function values(rows: number, width: number, casts: Record<number, string> = {}): string {
  const out: string[] = [];
  for (let r = 0; r < rows; r++) {
    out.push(`(${Array.from({ length: width }, (_, c) => `$${r * width + c + 1}${casts[c] ?? ''}`).join(', ')})`);
  }
  return out.join(', ');
}

/**
 * Deliveries of one group-committed transaction at most (`appendGrouped`): with the MX's default of 100
 * recipients a delivery (SVC_MX_MAX_RECIPIENTS), 32 keep a batch's INSERT under Postgres' 65,535 parameters;
 * a batch over it fails and is retried delivery by delivery.
 */
const MAX_GROUP = 32;

export interface MailStoreDeps {
  db: Db;
  blobs: BlobStore;
  feed: ChangeFeedWriter;
  clock: Clock;
  /** Failures after a commit (a blob reference not given back: a leak, never a loss). */
  onError?: (err: unknown) => void;
}

export function openMailStore({ db, blobs, feed, clock, onError = () => {} }: MailStoreDeps): MailStore {
  const now = () => new Date(clock.now());

  /**
   * One transaction for every input (a message delivered to several inboxes, or a group commit of several
   * deliveries: all rows or none, so a crash and the client's retry never duplicate a message in the inboxes
   * already done). Locks in the order of the file header, each kind sorted by id: the mailbox rows first (one
   * UPDATE a mailbox allocates a run of UIDs and MODSEQs, so concurrent appends queue on it and both only
   * grow), then the inbox rows (used_bytes). The rows and their journal entries go in one statement each. An
   * input whose inbox is gone or full is left out with its outcome; its UID is not reused (RFC 3501 §2.3.1.1
   * asks only for growth).
   */
  async function appendAll(inputs: readonly AppendInput[]): Promise<AppendOutcome[]> {
    const items = inputs.map((input) => {
      const address = checkBlobAddress(input.blob.address);
      if (!Number.isSafeInteger(input.blob.size) || input.blob.size < 0) throw new RangeError('bad blob size');
      const prefix = Buffer.from(input.prefix ?? new Uint8Array(0));
      return {
        input,
        address,
        prefix,
        flags: normalizeFlags(input.flags ?? []),
        size: prefix.length + input.blob.size,
      };
    });
    // At once, not one after the other: the local store's concurrent writes share one commit and one sync.
    // An input that takes its caller's reference needs none of its own (and gives none back below).
    const ours = items.filter((it) => !it.input.takesCallerRef);
    await Promise.all(ours.map((it) => blobs.addRef(it.address)));
    const outcomes: AppendOutcome[] = items.map(() => ({ kind: 'no_mailbox' }));
    const notices: ChangeNotice[] = [];
    try {
      await db.tx(async (q) => {
        notices.length = 0;
        const allocated = new Map<number, { inboxId: string; uid: number; modseq: number; uidValidity: number }>();
        for (const [mailboxId, idx] of groupBy(items.keys(), (i) => items[i]!.input.mailboxId)) {
          const [mb] = await q.query<{ inboxId: string; uid: number; modseq: number; uidValidity: number }>(
            `UPDATE mailboxes SET uid_next = uid_next + $2::bigint, highest_modseq = highest_modseq + $2::bigint
             WHERE id = $1
             RETURNING inbox_id AS "inboxId", uid_next - $2::bigint AS uid, highest_modseq - $2::bigint + 1 AS modseq,
               uid_validity AS "uidValidity"`,
            [mailboxId, idx.length],
          );
          if (mb) idx.forEach((i, j) => allocated.set(i, { ...mb, uid: mb.uid + j, modseq: mb.modseq + j }));
        }
        const stored: number[] = [];
        for (const [inboxId, idx] of groupBy(allocated.keys(), (i) => allocated.get(i)!.inboxId)) {
          // One UPDATE an inbox; a limit to enforce is checked message by message (IMAP APPEND, import).
          const runs = idx.some((i) => items[i]!.input.enforceLimit) ? idx.map((i) => [i]) : [idx];
          for (const run of runs) {
            const size = run.reduce((sum, i) => sum + items[i]!.size, 0);
            const first = items[run[0]!]!.input;
            const [inbox] = await q.query(
              `UPDATE inboxes SET used_bytes = used_bytes + $2,
                 billing_started_at = COALESCE(billing_started_at, $4::timestamptz)
               WHERE id = $1 AND deleted_at IS NULL AND (NOT $3::boolean OR used_bytes + $2 <= storage_limit_bytes)
               RETURNING used_bytes`,
              [inboxId, size, first.enforceLimit === true, first.startBillingAt ?? null],
            );
            if (inbox) stored.push(...run);
            else {
              const [live] = await q.query('SELECT 1 FROM inboxes WHERE id = $1 AND deleted_at IS NULL', [inboxId]);
              for (const i of run) outcomes[i] = { kind: live ? 'over_quota' : 'no_mailbox' };
            }
          }
        }
        // Nothing stored: roll back the UIDs and MODSEQs allocated above.
        if (!stored.length) throw new NothingStored();
        const at = now();
        const rows: unknown[] = [];
        const changes: unknown[] = [];
        for (const i of stored) {
          const { input, address, prefix, flags, size } = items[i]!;
          const mb = allocated.get(i)!;
          const id = randomUUID();
          rows.push(
            id,
            mb.inboxId,
            input.mailboxId,
            mb.uid,
            mb.modseq,
            address,
            prefix,
            size,
            input.internalDate,
            flags,
            input.messageId ?? null,
            json(input.envelope),
            json(input.structure),
            input.importKey ?? null,
            at,
          );
          changes.push(input.mailboxId, mb.modseq, mb.uid, 'append', at);
          outcomes[i] = { kind: 'appended', id, uid: mb.uid, modseq: mb.modseq, uidValidity: mb.uidValidity, size };
        }
        await q.query(
          `INSERT INTO mail_messages (id, inbox_id, mailbox_id, uid, modseq, blob_address, prefix, size,
             internal_date, flags, message_id, envelope, structure, import_key, created_at)
           VALUES ${values(stored.length, 15, { 9: '::text[]', 11: '::text::jsonb', 12: '::text::jsonb' })}`,
          rows,
        );
        await q.query(
          `INSERT INTO mail_changes (mailbox_id, modseq, uid, kind, created_at) VALUES ${values(stored.length, 5)}`,
          changes,
        );
        // One notice a mailbox, with its highest MODSEQ: a waking session reads every change up to it.
        for (const [mailboxId, idx] of groupBy(stored, (i) => items[i]!.input.mailboxId)) {
          const last = allocated.get(idx[idx.length - 1]!)!;
          const notice = { inboxId: last.inboxId, mailboxId, modseq: last.modseq };
          await feed.notifyIn(q, notice);
          notices.push(notice);
        }
      });
    } catch (err) {
      // Nothing references the bodies on our behalf: give back every reference taken above.
      await Promise.all(ours.map((it) => blobs.release(it.address).catch(onError)));
      if (err instanceof NothingStored) return outcomes;
      // The only unique index an append can hit is the import key's (docs/decisions.md #20); it rolls back
      // every input of the call, so the import appends one message at a time.
      if (isPgError(err, PG_UNIQUE_VIOLATION)) return items.map(() => ({ kind: 'duplicate' }));
      throw err;
    }
    // The inputs left out hold no row: their references go back.
    await Promise.all(
      items.map((it, i) =>
        outcomes[i]!.kind === 'appended' || it.input.takesCallerRef ? null : blobs.release(it.address).catch(onError),
      ),
    );
    for (const n of notices) feed.publish(n);
    return outcomes;
  }

  return {
    createDefaultMailboxes: (inboxId) => db.tx((q) => insertDefaultMailboxes(q, inboxId, now())),

    async createMailbox(inboxId, name, specialUse: SpecialUse | null = null) {
      if (!checkMailboxName(name)) throw new TypeError(`not a mailbox name: ${JSON.stringify(name)}`);
      if (name.toUpperCase() === 'INBOX') return null;
      const rows = await db.query<Mailbox>(
        `INSERT INTO mailboxes (id, inbox_id, name, special_use, created_at) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT DO NOTHING RETURNING ${MAILBOX}`,
        [randomUUID(), inboxId, name, specialUse, now()],
      );
      return rows[0] ?? null;
    },

    mailboxes: (inboxId) =>
      db.query<Mailbox>(`SELECT ${MAILBOX} FROM mailboxes WHERE inbox_id = $1 ORDER BY name = 'INBOX' DESC, name`, [
        inboxId,
      ]),

    async mailbox(mailboxId) {
      const rows = await db.query<Mailbox>(`SELECT ${MAILBOX} FROM mailboxes WHERE id = $1`, [mailboxId]);
      return rows[0] ?? null;
    },

    append: async (input) => (await appendAll([input]))[0] as AppendOutcome,
    appendAll,
    // Group commit (storage/pg/batch.ts, as for sends): the deliveries that arrive while a transaction runs
    // share the next one, each answered after its commit; a batch that fails is retried delivery by delivery,
    // so one bad delivery fails alone. One transaction at a time: each holds its mailboxes' row locks.
    appendGrouped: batched<readonly AppendInput[], AppendOutcome[]>(
      async (deliveries) => {
        const out = await appendAll(deliveries.flat());
        let k = 0;
        return deliveries.map((d) => out.slice(k, (k += d.length)));
      },
      appendAll,
      { max: MAX_GROUP, inFlight: 1 },
    ),

    async setFlags(mailboxId, uids, change, opts = {}) {
      normalizeFlags(change.flags);
      const wanted = checkUids(uids);
      const { unchangedSince } = opts;
      let notice: ChangeNotice | null = null;
      const result = await db.tx(async (q) => {
        // The mailbox lock also keeps every other flag change and expunge of this mailbox out until commit.
        const [mb] = await q.query<{ inboxId: string; highestModseq: number }>(
          `SELECT inbox_id AS "inboxId", highest_modseq AS "highestModseq" FROM mailboxes WHERE id = $1 FOR UPDATE`,
          [mailboxId],
        );
        const none = { modseq: null, changed: [], modified: [] };
        if (!mb || !wanted.length) return none;
        const rows = await q.query<{ uid: number; flags: string[]; modseq: number }>(
          'SELECT uid, flags, modseq FROM mail_messages WHERE mailbox_id = $1 AND uid = ANY($2::bigint[]) ORDER BY uid',
          [mailboxId, wanted],
        );
        const changed: { uid: number; flags: string[] }[] = [];
        const modified: number[] = [];
        for (const r of rows) {
          if (unchangedSince !== undefined && r.modseq > unchangedSince) modified.push(r.uid);
          else {
            const next = applyFlagChange(r.flags, change);
            if (!sameFlags(next, r.flags)) changed.push({ uid: r.uid, flags: next });
          }
        }
        if (!changed.length) return { ...none, modified };
        const modseq = mb.highestModseq + 1;
        await q.query('UPDATE mailboxes SET highest_modseq = $2 WHERE id = $1', [mailboxId, modseq]);
        const set = JSON.stringify(changed);
        await q.query(
          `UPDATE mail_messages m SET flags = c.flags, modseq = $3
           FROM jsonb_to_recordset($2::text::jsonb) AS c(uid bigint, flags text[])
           WHERE m.mailbox_id = $1 AND m.uid = c.uid`,
          [mailboxId, set, modseq],
        );
        await q.query(
          `INSERT INTO mail_changes (mailbox_id, modseq, uid, kind, flags, created_at)
           SELECT $1, $3, c.uid, 'flags', c.flags, $4
           FROM jsonb_to_recordset($2::text::jsonb) AS c(uid bigint, flags text[])`,
          [mailboxId, set, modseq, now()],
        );
        notice = { inboxId: mb.inboxId, mailboxId, modseq };
        await feed.notifyIn(q, notice);
        return { modseq, changed, modified };
      });
      if (notice) feed.publish(notice);
      return result;
    },

    async expunge(mailboxId, uids, opts = {}) {
      const wanted = checkUids(uids);
      let notice: ChangeNotice | null = null;
      const { result, released } = await db.tx(async (q) => {
        const [mb] = await q.query<{ inboxId: string; highestModseq: number }>(
          `SELECT inbox_id AS "inboxId", highest_modseq AS "highestModseq" FROM mailboxes WHERE id = $1 FOR UPDATE`,
          [mailboxId],
        );
        const nothing = { result: { modseq: null, expunged: [] }, released: [] };
        if (!mb || !wanted.length) return nothing;
        const gone = await q.query<{ uid: number; size: number; blobAddress: string }>(
          `DELETE FROM mail_messages WHERE mailbox_id = $1 AND uid = ANY($2::bigint[])
             AND (NOT $3::boolean OR '\\Deleted' = ANY(flags))
           RETURNING uid, size, blob_address AS "blobAddress"`,
          [mailboxId, wanted, opts.deletedOnly === true],
        );
        if (!gone.length) return nothing;
        const modseq = mb.highestModseq + 1;
        const expunged = gone.map((g) => g.uid).sort((a, b) => a - b);
        await q.query('UPDATE mailboxes SET highest_modseq = $2 WHERE id = $1', [mailboxId, modseq]);
        await q.query('UPDATE inboxes SET used_bytes = used_bytes - $2 WHERE id = $1', [
          mb.inboxId,
          gone.reduce((sum, g) => sum + g.size, 0),
        ]);
        await q.query(
          `INSERT INTO mail_changes (mailbox_id, modseq, uid, kind, created_at)
           SELECT $1, $2, u, 'expunge', $4 FROM unnest($3::bigint[]) AS u`,
          [mailboxId, modseq, expunged, now()],
        );
        notice = { inboxId: mb.inboxId, mailboxId, modseq };
        await feed.notifyIn(q, notice);
        return { result: { modseq, expunged }, released: gone.map((g) => g.blobAddress) };
      });
      // After the commit, never before: a crash in between leaks a reference instead of losing a body.
      const counts = new Map<string, number>();
      for (const a of released) counts.set(a, (counts.get(a) ?? 0) + 1);
      for (const [address, n] of counts) await blobs.release(address, n).catch(onError);
      if (notice) feed.publish(notice);
      return result;
    },

    changesSince: (mailboxId, modseq, limit = 10_000) =>
      db.query<Change>(
        `SELECT modseq, uid, kind, flags FROM mail_changes WHERE mailbox_id = $1 AND modseq > $2
         ORDER BY modseq, uid LIMIT $3`,
        [mailboxId, modseq, limit],
      ),

    async messages(mailboxId, opts = {}) {
      const rows = await db.query<StoredMessage>(
        `SELECT ${MESSAGE} FROM mail_messages
         WHERE mailbox_id = $1 AND ($2::bigint[] IS NULL OR uid = ANY($2::bigint[]))
           AND ($3::bigint IS NULL OR modseq > $3::bigint)
         ORDER BY uid`,
        [mailboxId, opts.uids ? checkUids(opts.uids) : null, opts.changedSince ?? null],
      );
      for (const r of rows) r.prefix = asBuffer(r.prefix);
      return rows;
    },
  };
}
