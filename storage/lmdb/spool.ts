// The outbound spool on LMDB: queue entries keyed by [nextAttemptMs, domain, id] so that "what is due"
// is a range scan (docs/conventions.md #8), and immutable message bodies stored once beside them
// (docs/conventions.md #9).
//
// Three named databases in the one environment (so one LMDB transaction can span them):
//   queue   [nextAttemptMs, domain, id] → SpoolEntry   the key order is the schedule
//   index   id → its current queue key                  get/reschedule/remove by id without a scan
//   bodies  id → Buffer (raw bytes, no msgpack)         written at enqueue, deleted at remove, never changed
//   leases  id → lease end                              entries leased and not yet rescheduled or removed
//
// Durability (docs/decisions.md #15): every write resolves only after its transaction has committed AND
// the environment's `flushed` promise has resolved. lmdb-js opens environments with overlappingSync on
// Linux: the commit promise resolves once the transaction is visible, before the fsync; `flushed`
// resolves once that fsync has completed. Acknowledging on the commit alone would survive `kill -9`
// (the page cache outlives the process) but not a power loss.
//
// Group commit: writes go through `root.transaction()`, whose callbacks lmdb-js runs together in one LMDB
// transaction with every other write queued in the same event turn (eventTurnBatching), and then one
// fsync covers the lot. So callers are never serialized here: N concurrent enqueues cost a few commits,
// not N (issue 5, Speed: ~2k durable puts/s one at a time, 50k–150k/s sharing commits).
import { Buffer } from 'node:buffer';
import type { Database } from 'lmdb';
import type { LmdbEnv } from './env.js';

export interface SpoolEntry {
  id: string;
  projectId: string;
  /** Destination domain (of the recipient): the unit of MX resolution and connection pools. */
  domain: string;
  /** Envelope: MAIL FROM (the VERP return path) and RCPT TO. */
  mailFrom: string;
  rcptTo: string;
  /** The outbound capability whose DKIM key signs it. */
  outboundId: string;
  nextAttemptMs: number;
  attempts: number;
  createdMs: number;
  /**
   * Set when an operator cancelled the message (`svc queue delete`): the time of the cancellation.
   * The entry stays spooled, due at that time, so that the delivery worker, which owns the message's
   * Postgres row, is the one that ends it: on leasing an entry with this set it records a `failed`
   * event (detail `{ reason: 'cancelled by operator' }`) and removes the entry, never dialling.
   * Kept by `reschedule()` and `lease()`; absent on every entry that was not cancelled.
   */
  cancelledMs?: number;
  /** Why it was cancelled, when not by an operator: the API's cancel (`holdUnsent`) sets 'cancelled'. */
  cancelReason?: string;
  /**
   * A message to several recipients (docs/api.md §4.11): one envelope (SMTP transaction) per recipient
   * domain, each with its own schedule and attempt count; the entry is due at the earliest of them, and
   * `domain` and `rcptTo` are the first recipient's. Absent for a message to one recipient (the entry's own
   * domain and rcptTo are then its envelope).
   */
  envelopes?: SpoolEnvelope[];
}

export interface SpoolEnvelope {
  domain: string;
  /** The recipients of this domain still to be delivered. */
  rcpts: string[];
  nextAttemptMs: number;
  attempts: number;
}

export interface Spool {
  /**
   * Stores the entry and its body; resolves only once both are durable on disk (committed and
   * flushed). Concurrent calls share commits (group commit).
   */
  enqueue(entry: SpoolEntry, body: Buffer): Promise<void>;
  /** Stores several entries and their bodies in one write transaction and one sync (a batch of sends). */
  enqueueMany(items: readonly { entry: SpoolEntry; body: Buffer }[]): Promise<void>;
  /** Removes several entries and their bodies in one write transaction; durable. */
  removeMany(ids: readonly string[]): Promise<void>;
  /** Entries due at nowMs, oldest first, at most `limit`. */
  due(nowMs: number, limit: number): SpoolEntry[];
  get(id: string): SpoolEntry | undefined;
  body(id: string): Buffer | undefined;
  /**
   * Moves an entry to a new attempt time (a lease before dialling, or the next backoff); durable. `envelopes`,
   * when given, replaces the entry's (what is left of a message to several recipients).
   */
  reschedule(id: string, nextAttemptMs: number, attempts?: number, envelopes?: SpoolEnvelope[]): Promise<void>;
  /** Removes an entry and its body; durable. */
  remove(id: string): Promise<void>;
  /** Every entry, in key order (for `svc queue`). */
  list(limit: number): SpoolEntry[];
  /**
   * Every entry in key order, read lazily on one read snapshot (for `svc queue` filters, which must not
   * hold the whole queue in memory). Finish or abandon the iteration before writing from the same caller.
   */
  entries(): Iterable<SpoolEntry>;
  count(): number;
  /**
   * Cancels a message for the operator (`svc queue delete`): in one durable write transaction, sets
   * `cancelledMs` (keeping an earlier cancellation's time) and moves the entry to be due at `nowMs`, so
   * the delivery worker picks it up, records it failed and removes it. Resolves false when the id is not
   * spooled. The entry is never removed here: its Postgres row would otherwise stay `queued` forever.
   */
  cancel(id: string, nowMs: number): Promise<boolean>;
  /**
   * Makes every leased entry due at `nowMs`, for an MTA starting on this spool: the leases were taken
   * by a process that is gone (one MTA owns a spool), so its deliveries in progress are retried now
   * rather than when their leases would have run out. Resolves with the number taken back.
   */
  recoverLeases(nowMs: number): Promise<number>;
  /**
   * Added for the MTA's scheduler: takes up to `limit` entries due at `nowMs` and, in the same write
   * transaction that reads them, moves each to `leaseUntilMs` (docs/conventions.md #8: reschedule before you
   * attempt). Resolves with the leased entries (their `nextAttemptMs` is `leaseUntilMs`) once the move
   * is durable; dial only then. Because the read happens inside LMDB's single write transaction, two
   * overlapping calls (or two processes sharing the directory) never lease the same entry, which
   * `due()` followed by `reschedule()` cannot promise. A crash mid-delivery leaves the entry due again
   * at `leaseUntilMs`: a retry, not a hot loop and not a loss.
   */
  lease(nowMs: number, limit: number, leaseUntilMs: number): Promise<SpoolEntry[]>;
  /**
   * For the API's cancel and reschedule of a message that has not started sending (docs/api.md §4.11): in one
   * write transaction, checks that the entry is neither leased nor tried (no attempt on it or on any of its
   * envelopes) nor cancelled, and then either marks it cancelled (`cancelledMs`, `cancelReason: 'cancelled'`,
   * its time kept: the caller records it in Postgres and removes it; the MTA does both if the caller stops
   * first) or moves it, and every envelope, to `moveToMs`. Resolves 'held' when done, 'started' when the entry
   * is leased, tried or cancelled, 'absent' when the id is not spooled. The lease being the same kind of
   * transaction, a message is never both held here and dialled.
   */
  holdUnsent(id: string, change: { cancelAtMs: number } | { moveToMs: number }): Promise<'held' | 'started' | 'absent'>;
}

type QueueKey = [nextAttemptMs: number, domain: string, id: string];

// LMDB's default maximum key size is 1978 bytes; ordered-binary adds a type byte and a separator per
// element and 9 bytes for the number. Refuse oversize keys before any write so that a transaction
// callback never throws half-way (lmdb-js would still commit the writes made before the throw).
const MAX_KEY_TEXT_BYTES = 1900;

function checkKeyParts(id: string, domain: string): void {
  if (typeof id !== 'string' || id === '') throw new TypeError('spool: id must be a non-empty string');
  if (typeof domain !== 'string' || domain === '') throw new TypeError('spool: domain must be a non-empty string');
  // ordered-binary uses NUL as the separator between array elements, so a NUL would corrupt key order.
  if (id.includes('\0') || domain.includes('\0')) throw new TypeError('spool: id and domain must not contain NUL');
  if (Buffer.byteLength(id) + Buffer.byteLength(domain) > MAX_KEY_TEXT_BYTES) {
    throw new RangeError('spool: id and domain are too long for an LMDB key');
  }
}

function checkTime(ms: number, what: string): void {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) throw new TypeError(`spool: ${what} must be a finite number`);
}

// Stores exactly the contract's fields, so a caller's extra properties never leak into the spool.
function copyEntry(e: SpoolEntry): SpoolEntry {
  return {
    id: e.id,
    projectId: e.projectId,
    domain: e.domain,
    mailFrom: e.mailFrom,
    rcptTo: e.rcptTo,
    outboundId: e.outboundId,
    nextAttemptMs: e.nextAttemptMs,
    attempts: e.attempts,
    createdMs: e.createdMs,
    // Only when set: an entry that was never cancelled has no such property at all.
    ...(e.cancelledMs !== undefined ? { cancelledMs: e.cancelledMs } : {}),
    ...(e.cancelReason !== undefined ? { cancelReason: e.cancelReason } : {}),
    ...(e.envelopes !== undefined ? { envelopes: e.envelopes.map(copyEnvelope) } : {}),
  };
}

function copyEnvelope(v: SpoolEnvelope): SpoolEnvelope {
  checkTime(v.nextAttemptMs, 'envelope nextAttemptMs');
  return { domain: v.domain, rcpts: [...v.rcpts], nextAttemptMs: v.nextAttemptMs, attempts: v.attempts };
}

export function openSpool(env: LmdbEnv): Spool {
  const { root } = env;
  const queue: Database<SpoolEntry, QueueKey> = root.openDB<SpoolEntry, QueueKey>({ name: 'queue' });
  const index: Database<QueueKey, string> = root.openDB<QueueKey, string>({ name: 'index' });
  // 'binary': the body is stored as the caller's bytes and read back as a Buffer, with no encoding.
  const bodies: Database<Buffer, string> = root.openDB<Buffer, string>({ name: 'bodies', encoding: 'binary' });
  const leases: Database<number, string> = root.openDB<number, string>({ name: 'leases' });

  // Resolves after the transaction committed and then the environment's latest commit was fsynced.
  // `flushed` is read after the commit, so it tracks our commit or a later one; LMDB syncs the whole
  // file and its meta page in order, so a later flush covers every earlier commit.
  // The callback runs inside the shared batch transaction, not a child transaction of its own: a
  // nested LMDB transaction per call made a 20k-message burst about half as fast here. Each call stays
  // atomic because its callback never throws half-way (inputs are checked before `durable` is called),
  // and a put that fails inside LMDB marks the transaction failed (MDB_TXN_ERROR), so that commit is
  // rejected as a whole.
  async function durable<T>(txn: () => T): Promise<T> {
    const result = await root.transaction(txn);
    await root.flushed;
    return result;
  }

  // Inside a write transaction: moves an entry from its current key to a new time.
  // Every move ends a lease except the lease itself, which records one after moving.
  function move(oldKey: QueueKey, entry: SpoolEntry, nextAttemptMs: number, attempts: number): SpoolEntry {
    leases.remove(entry.id);
    const moved: SpoolEntry = { ...entry, nextAttemptMs, attempts };
    const newKey: QueueKey = [nextAttemptMs, entry.domain, entry.id];
    queue.remove(oldKey);
    queue.put(newKey, moved);
    index.put(entry.id, newKey);
    return moved;
  }

  // Checks an entry and its body, and returns the writes that store them (inside a write transaction).
  // The body is copied into LMDB when the batch runs: the caller must not modify it until the write settles.
  function checkedPut(entry: SpoolEntry, body: Buffer): () => void {
    checkKeyParts(entry.id, entry.domain);
    checkTime(entry.nextAttemptMs, 'nextAttemptMs');
    if (entry.cancelledMs !== undefined) checkTime(entry.cancelledMs, 'cancelledMs');
    if (!(body instanceof Uint8Array)) throw new TypeError('spool: body must be a Buffer');
    const stored = copyEntry(entry);
    const key: QueueKey = [stored.nextAttemptMs, stored.domain, stored.id];
    return () => {
      // Enqueueing an id that is already spooled replaces it, so a retried enqueue never leaves a
      // second queue key (a duplicate delivery) behind.
      const previous = index.get(stored.id);
      if (previous) queue.remove(previous);
      leases.remove(stored.id);
      bodies.put(stored.id, body);
      queue.put(key, stored);
      index.put(stored.id, key);
    };
  }

  // Inside a write transaction: an entry and its body gone.
  function removeIn(id: string): void {
    const key = index.get(id);
    if (key) queue.remove(key);
    index.remove(id);
    bodies.remove(id);
    leases.remove(id);
  }

  return {
    async enqueue(entry, body) {
      const put = checkedPut(entry, body);
      await durable(put);
    },

    async enqueueMany(items) {
      // Every input checked before the transaction, so that its callback never throws half-way.
      const puts = items.map(({ entry, body }) => checkedPut(entry, body));
      await durable(() => {
        for (const put of puts) put();
      });
    },

    async removeMany(ids) {
      await durable(() => {
        for (const id of ids) removeIn(id);
      });
    },

    due(nowMs, limit) {
      const out: SpoolEntry[] = [];
      if (limit <= 0) return out;
      // [nowMs + 1] sorts after every [nowMs, domain, id]; the check below keeps a fractional
      // nextAttemptMs in (nowMs, nowMs + 1) out.
      for (const { key, value } of queue.getRange({ end: [nowMs + 1] as unknown as QueueKey, limit })) {
        if (key[0] > nowMs) break;
        out.push(value);
      }
      return out;
    },

    get(id) {
      const key = index.get(id);
      return key ? queue.get(key) : undefined;
    },

    body(id) {
      return bodies.get(id);
    },

    async reschedule(id, nextAttemptMs, attempts, envelopes) {
      checkTime(nextAttemptMs, 'nextAttemptMs');
      const copied = envelopes?.map(copyEnvelope);
      await durable(() => {
        // Read inside the write transaction: the index is current even if another reschedule or a
        // remove was queued just before this one. An id no longer spooled (delivered, or deleted by
        // an operator meanwhile) is left alone rather than resurrected.
        const oldKey = index.get(id);
        if (!oldKey) return;
        const entry = queue.get(oldKey);
        if (!entry) return;
        move(oldKey, copied ? { ...entry, envelopes: copied } : entry, nextAttemptMs, attempts ?? entry.attempts);
      });
    },

    async remove(id) {
      await durable(() => removeIn(id));
    },

    list(limit) {
      const out: SpoolEntry[] = [];
      if (limit <= 0) return out;
      for (const { value } of queue.getRange({ limit })) out.push(value);
      return out;
    },

    entries() {
      return queue.getRange({}).map(({ value }) => value);
    },

    count() {
      // The database's own entry count (mdb_stat), O(1) rather than a scan of the queue.
      return (queue.getStats() as { entryCount: number }).entryCount;
    },

    async lease(nowMs, limit, leaseUntilMs) {
      checkTime(nowMs, 'nowMs');
      checkTime(leaseUntilMs, 'leaseUntilMs');
      if (limit <= 0) return [];
      return durable(() => {
        // Collect first, then move: writing to `queue` while a cursor walks it would disturb the walk.
        const picked: { key: QueueKey; value: SpoolEntry }[] = [];
        for (const { key, value } of queue.getRange({ end: [nowMs + 1] as unknown as QueueKey, limit })) {
          if (key[0] > nowMs) break;
          picked.push({ key, value });
        }
        return picked.map(({ key, value }) => {
          const moved = move(key, value, leaseUntilMs, value.attempts);
          leases.put(value.id, leaseUntilMs);
          return moved;
        });
      });
    },

    async recoverLeases(nowMs) {
      checkTime(nowMs, 'nowMs');
      return durable(() => {
        const ids = [...leases.getKeys()];
        let n = 0;
        for (const id of ids) {
          const key = index.get(id);
          const entry = key && queue.get(key);
          if (key && entry) {
            move(key, entry, nowMs, entry.attempts);
            n++;
          } else leases.remove(id);
        }
        return n;
      });
    },

    async holdUnsent(id, change) {
      checkTime('cancelAtMs' in change ? change.cancelAtMs : change.moveToMs, 'holdUnsent time');
      return durable(() => {
        const key = index.get(id);
        const entry = key && queue.get(key);
        if (!key || !entry) return 'absent';
        const tried = entry.attempts > 0 || (entry.envelopes ?? []).some((v) => v.attempts > 0);
        if (leases.get(id) !== undefined || tried || entry.cancelledMs !== undefined) return 'started';
        if ('cancelAtMs' in change)
          queue.put(key, { ...entry, cancelledMs: change.cancelAtMs, cancelReason: 'cancelled' });
        else
          move(
            key,
            entry.envelopes
              ? { ...entry, envelopes: entry.envelopes.map((v) => ({ ...v, nextAttemptMs: change.moveToMs })) }
              : entry,
            change.moveToMs,
            entry.attempts,
          );
        return 'held';
      });
    },

    async cancel(id, nowMs) {
      checkTime(nowMs, 'nowMs');
      return durable(() => {
        // Read inside the write transaction, as reschedule does: a message delivered (removed) just
        // before is not resurrected, and a lease or reschedule queued just before is not undone.
        const oldKey = index.get(id);
        if (!oldKey) return false;
        const entry = queue.get(oldKey);
        if (!entry) return false;
        move(oldKey, { ...entry, cancelledMs: entry.cancelledMs ?? nowMs }, nowMs, entry.attempts);
        return true;
      });
    },
  };
}
