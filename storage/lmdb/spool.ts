// The outbound spool on LMDB: queue entries keyed by [nextAttemptMs, domain, id] so that "what is due"
// is a range scan (docs/conventions.md #8), and immutable message bodies stored once beside them
// (docs/conventions.md #9).
//
// Three named databases in the one environment (so one LMDB transaction can span them):
//   queue   [nextAttemptMs, domain, id] → SpoolEntry   the key order is the schedule
//   index   id → its current queue key                  get/reschedule/remove by id without a scan
//   bodies  id → Buffer (raw bytes, no msgpack)         written at enqueue, deleted at remove, never changed
//   leases  id → [lease end, owner tag]                 entries leased and not yet rescheduled or removed, and
//                                                       the process that leased them (lease-owner.ts); a plain
//                                                       number (an earlier version's) is owned by no one alive
//   held    domain (domainKey) → since                  destination domains an operator holds (`svc queue hold`)
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
import { normalizeDomain } from '../../mail/domain-names.js';
import type { LmdbEnv } from './env.js';
import { wakeSignal, type WakeSignal } from '../wake-signal.js';
import {
  currentOwner,
  ownerTag,
  parseOwnerTag,
  processAlive,
  sameOwner,
  type LeaseOwner,
  type OwnerLiveness,
} from './lease-owner.js';

/**
 * How long the lease parks a due entry (or envelope) of a held domain before looking at it again: a write per
 * held entry an hour, and a hold that went missing (a `release` stopped half-way) undoes itself within the hour.
 */
export const HELD_RECHECK_MS = 60 * 60_000;

/**
 * The held set's key for a destination domain: spooled domains are as the recipient address had them, so
 * case, a trailing dot and the IDN spelling (Unicode or punycode) are folded away, as `svc queue --domain` does.
 */
export function domainKey(domain: string): string {
  const lower = domain.trim().toLowerCase().replace(/\.$/, '');
  return normalizeDomain(lower) ?? lower;
}

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
  /**
   * Why it was cancelled, when not by `svc queue delete` ('cancelled by operator'): the API's cancel
   * (`holdUnsent`) sets 'cancelled', `svc queue bounce` 'bounced by operator'.
   */
  cancelReason?: string;
  /**
   * Set by the lease while the entry's domain is held (`svc queue hold`): when it was first parked. Absent
   * otherwise. A message to several carries it on its held envelopes instead (SpoolEnvelope.heldMs).
   */
  heldMs?: number;
  /**
   * A message to several recipients (docs/api.md §4.11): one envelope (SMTP transaction) per recipient
   * domain, each with its own schedule and attempt count; the entry is due at the earliest of them, and
   * `domain` and `rcptTo` are the first recipient's. Absent for a message to one recipient (the entry's own
   * domain and rcptTo are then its envelope).
   */
  envelopes?: SpoolEnvelope[];
  /**
   * Set when the body is composeMessage's: its wire check (assertWireSafe) found every CR and LF in it in a CRLF pair,
   * and the DKIM signer then does not look again (mail/dkim-sign.ts). Absent: not known, and looked for.
   */
  crlfOnly?: true;
}

export interface SpoolEnvelope {
  domain: string;
  /** The recipients of this domain still to be delivered. */
  rcpts: string[];
  nextAttemptMs: number;
  attempts: number;
  /**
   * Set by the lease while this envelope's domain is held: the worker sends no held envelope, and the lease
   * parks a due one HELD_RECHECK_MS ahead. Cleared by the first lease after the domain is released.
   */
  heldMs?: number;
}

/** One group of `summary()`: messages (a message to several counts once in each of its domains). */
export interface SpoolSummaryRow {
  key: string;
  messages: number;
  /** Tried at least once (attempts > 0): deferred, in Postfix's words. */
  deferred: number;
  /** Parked because their domain is held. */
  held: number;
  oldestCreatedMs: number;
}

export interface SpoolSummary {
  total: number;
  deferred: number;
  held: number;
  cancelled: number;
  oldestCreatedMs: number | null;
  /** By destination domain (as spooled), most messages first. */
  byDomain: SpoolSummaryRow[];
  /** By sender domain (the domain of MAIL FROM, the return path), most messages first. */
  bySender: SpoolSummaryRow[];
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
  /**
   * Says that messages were spooled and their rows committed, so that a delivery worker looks at the spool now rather
   * than at its next poll (docs/decisions.md #86): this process's, or where it has none those of the other processes
   * on the spool's wake file (SpoolOptions.wakeFile).
   */
  wake: WakeSignal['wake'];
  /** Calls `listener` at each wake(); the function returned stops that. */
  onWake: WakeSignal['onWake'];
  get(id: string): SpoolEntry | undefined;
  body(id: string): Buffer | undefined;
  /**
   * The body lent to `use`, which must be done with it before it returns: in lmdb-js's read buffer, which the next
   * read reuses (or a view of the map), not a copy of its own. undefined, `use` not called, for a body not stored.
   */
  withBody<T>(id: string, use: (body: Buffer) => T): T | undefined;
  /** `prefix` then the body, in one new buffer (one copy of the body); undefined for a body not stored. */
  bodyAfter(id: string, prefix: Buffer): Buffer | undefined;
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
  cancel(id: string, nowMs: number, reason?: string): Promise<boolean>;
  /**
   * For `svc queue summary` (Postfix's qshape): one pass over the queue database on one read snapshot,
   * counting per destination domain and per sender domain; no body is read.
   */
  summary(): SpoolSummary;
  /** The held domains (domainKey form) and since when, by name. */
  heldDomains(): { domain: string; sinceMs: number }[];
  /** Holds a destination domain (`svc queue hold`); durable. Resolves false when it was already held. */
  hold(domain: string, nowMs: number): Promise<boolean>;
  /**
   * Ends a hold (`svc queue release`): drops the domain from the held set (durable), then makes every entry
   * with a recipient in that domain due at `nowMs` (those envelopes too, their flags cleared), in slices of
   * write transactions; a leased entry (being tried) is left to its attempt. Resolves with whether it was held
   * (when not, nothing is changed) and how many entries were made due.
   */
  release(domain: string, nowMs: number): Promise<{ wasHeld: boolean; released: number }>;
  /**
   * For an MTA process starting on this spool, which several MTA processes may share: makes due at `nowMs`
   * every leased entry whose owner is gone (`isAlive` says no; by default the kernel's answer, lease-owner.ts),
   * so that a dead process's deliveries in progress are retried now rather than when their leases would have
   * run out. Leases of this spool's own process and of live siblings are left alone; a lease written by an
   * earlier version (no owner) counts as owned by no one alive. One read pass first, and a write transaction
   * only when something is to be taken back (each lease looked at again inside it). Resolves with the number
   * taken back.
   */
  recoverLeases(nowMs: number, isAlive?: OwnerLiveness): Promise<number>;
  /**
   * Added for the MTA's scheduler: takes up to `limit` entries due at `nowMs` and, in the same write
   * transaction that reads them, moves each to `leaseUntilMs` (docs/conventions.md #8: reschedule before you
   * attempt). Resolves with the leased entries (their `nextAttemptMs` is `leaseUntilMs`) once the move
   * is durable; dial only then. Because the read happens inside LMDB's single write transaction, two
   * overlapping calls (or two processes sharing the directory) never lease the same entry, which
   * `due()` followed by `reschedule()` cannot promise. A crash mid-delivery leaves the entry due again
   * at `leaseUntilMs`: a retry, not a hot loop and not a loss. Each lease records this spool's owner
   * (`openSpool`'s `owner`, by default this process), which `recoverLeases` reads.
   *
   * Held domains (`hold()`): the same transaction reads the held set once (a few keys) and, only when it is
   * not empty, parks each due entry of a held domain HELD_RECHECK_MS ahead with `heldMs` set instead of
   * leasing it, so the worker never sees it and no held entry stays due (the poll loop stays idle). A message
   * to several is held per envelope: its held envelopes are flagged (and parked when due) and the entry is
   * leased for the others; it is parked whole when every envelope is held, or when only held ones were due.
   * A cancelled entry is never parked: the worker ends it. Any other entry gets its flags cleared.
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
/** `release` makes a held domain's entries due in write transactions of this many. */
const RELEASE_SLICE = 1_000;

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
    ...(e.heldMs !== undefined ? { heldMs: e.heldMs } : {}),
    ...(e.envelopes !== undefined ? { envelopes: e.envelopes.map(copyEnvelope) } : {}),
    ...(e.crlfOnly === true ? { crlfOnly: true } : {}),
  };
}

/** A copy without `heldMs` (the object itself when it has none). */
function unheld<T extends { heldMs?: number }>(x: T): T {
  if (x.heldMs === undefined) return x;
  const y = { ...x };
  delete y.heldMs;
  return y;
}

/** An entry with no held flag left, on it or on its envelopes. */
function unheldAll(e: SpoolEntry): SpoolEntry {
  if (e.heldMs === undefined && !e.envelopes?.some((v) => v.heldMs !== undefined)) return e;
  return e.envelopes ? { ...unheld(e), envelopes: e.envelopes.map(unheld) } : unheld(e);
}

function copyEnvelope(v: SpoolEnvelope): SpoolEnvelope {
  checkTime(v.nextAttemptMs, 'envelope nextAttemptMs');
  return {
    domain: v.domain,
    rcpts: [...v.rcpts],
    nextAttemptMs: v.nextAttemptMs,
    attempts: v.attempts,
    ...(v.heldMs !== undefined ? { heldMs: v.heldMs } : {}),
  };
}

export interface SpoolOptions {
  /** Whom this spool's leases name: this process unless a test says otherwise (lease-owner.ts). */
  owner?: LeaseOwner;
  /** The file through which wake() reaches the delivery workers of other processes (wake-signal.ts); none: this one. */
  wakeFile?: string;
}

/** A lease: its end, and the owner's tag (lease-owner.ts); a plain number from an earlier version. */
type LeaseValue = number | [untilMs: number, owner: string];

export function openSpool(env: LmdbEnv, opts: SpoolOptions = {}): Spool {
  const self = opts.owner ?? currentOwner();
  const selfTag = ownerTag(self);
  const { root } = env;
  const queue: Database<SpoolEntry, QueueKey> = root.openDB<SpoolEntry, QueueKey>({ name: 'queue' });
  const index: Database<QueueKey, string> = root.openDB<QueueKey, string>({ name: 'index' });
  // 'binary': the body is stored as the caller's bytes and read back as a Buffer, with no encoding.
  const bodies: Database<Buffer, string> = root.openDB<Buffer, string>({ name: 'bodies', encoding: 'binary' });
  const leases: Database<LeaseValue, string> = root.openDB<LeaseValue, string>({ name: 'leases' });
  const held: Database<number, string> = root.openDB<number, string>({ name: 'held' });
  const woken = wakeSignal(opts.wakeFile);

  // getBinaryFast lends the stored bytes in lmdb-js's read buffer, which the next read reuses (or as a view of the
  // map); getBinary copies them again, into a new zero-filled buffer. A 100 kB message read that way for its
  // signature and again for its send, then joined to its signature fields, cost the MTA five copies and two
  // zero-fills of its body (~7% of its CPU); withBody and bodyAfter cost three copies. The lent bytes go to `use` as
  // a view of their own length: lmdb-js's reusable read buffer (a small body) says its value's length in a `length`
  // property of its own, which subarray, indexOf and Buffer.concat do not read.
  const withBody = <T>(id: string, use: (body: Buffer) => T): T | undefined => {
    const lent = bodies.getBinaryFast(id);
    return lent === undefined ? undefined : use(lent.subarray(0, lent.length));
  };

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

  // The held set as a test on a spooled domain, or null when no domain is held (read in the caller's
  // transaction or snapshot; a few keys). Each domain is folded (domainKey) once per call.
  function heldMatcher(): ((domain: string) => boolean) | null {
    const keys = new Set<string>();
    for (const k of held.getKeys({})) keys.add(k);
    if (!keys.size) return null;
    const seen = new Map<string, boolean>();
    return (domain) => {
      let hit = seen.get(domain);
      if (hit === undefined) seen.set(domain, (hit = keys.has(domainKey(domain))));
      return hit;
    };
  }

  // Inside the lease's transaction, with a domain held (see Spool.lease): the entry to lease, its held flags
  // brought up to date, or null when it was parked here instead.
  function parkHeld(key: QueueKey, e: SpoolEntry, nowMs: number, isHeld: (d: string) => boolean): SpoolEntry | null {
    if (e.cancelledMs !== undefined) return unheldAll(e);
    const park = nowMs + HELD_RECHECK_MS;
    if (!e.envelopes) {
      if (!isHeld(e.domain)) return unheld(e);
      move(key, { ...e, heldMs: e.heldMs ?? nowMs }, park, e.attempts);
      return null;
    }
    let free = false;
    let freeDue = false;
    let anyDue = false;
    const envelopes = e.envelopes.map((v) => {
      const due = v.nextAttemptMs <= nowMs;
      anyDue ||= due;
      if (!isHeld(v.domain)) {
        free = true;
        freeDue ||= due;
        return unheld(v);
      }
      return { ...v, heldMs: v.heldMs ?? nowMs, nextAttemptMs: due ? park : v.nextAttemptMs };
    });
    const next: SpoolEntry = { ...unheld(e), envelopes };
    // Every envelope held, or only held ones were due: parked until its earliest envelope (always later than
    // now). With none due at all (`svc queue retry` made the entry due early), the free ones are sent.
    if (!free || (anyDue && !freeDue)) {
      move(key, next, Math.min(...envelopes.map((v) => v.nextAttemptMs)), e.attempts);
      return null;
    }
    return next;
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

    wake: woken.wake,
    onWake: woken.onWake,

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

    withBody,

    bodyAfter(id, prefix) {
      return withBody(id, (body) => Buffer.concat([prefix, body], prefix.length + body.length));
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
        // The held set, read once in this same transaction (no extra one per entry); null when empty,
        // the usual case, which costs nothing more per entry.
        const isHeld = heldMatcher();
        const out: SpoolEntry[] = [];
        for (const { key, value } of picked) {
          const e = isHeld ? parkHeld(key, value, nowMs, isHeld) : unheldAll(value);
          if (!e) continue;
          out.push(move(key, e, leaseUntilMs, e.attempts));
          leases.put(e.id, [leaseUntilMs, selfTag]);
        }
        return out;
      });
    },

    async recoverLeases(nowMs, isAlive = processAlive(self)) {
      checkTime(nowMs, 'nowMs');
      // Asked once per owner per pass (a few processes, however many leases).
      const verdicts = new Map<string, boolean>();
      const gone = (value: LeaseValue): boolean => {
        if (!Array.isArray(value)) return true;
        const tag = value[1];
        let dead = verdicts.get(tag);
        if (dead === undefined) {
          const owner = parseOwnerTag(tag);
          dead = !owner || (!sameOwner(owner, self) && !isAlive(owner));
          verdicts.set(tag, dead);
        }
        return dead;
      };
      // A read first: a process starting beside live siblings finds nothing to take and writes nothing.
      let any = false;
      for (const { value } of leases.getRange({})) if ((any = gone(value))) break;
      if (!any) return 0;
      return durable(() => {
        // Collect first, then move (a move removes the lease under the cursor). Read again here: a lease
        // ended or taken anew since the read pass is no longer this owner's to lose.
        const ids: string[] = [];
        for (const { key, value } of leases.getRange({})) if (gone(value)) ids.push(key);
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

    async cancel(id, nowMs, reason) {
      checkTime(nowMs, 'nowMs');
      return durable(() => {
        // Read inside the write transaction, as reschedule does: a message delivered (removed) just
        // before is not resurrected, and a lease or reschedule queued just before is not undone.
        const oldKey = index.get(id);
        if (!oldKey) return false;
        const entry = queue.get(oldKey);
        if (!entry) return false;
        // A second cancellation keeps the first one's time and reason.
        const cancelled: SpoolEntry =
          entry.cancelledMs !== undefined
            ? entry
            : { ...entry, cancelledMs: nowMs, ...(reason !== undefined ? { cancelReason: reason } : {}) };
        move(oldKey, cancelled, nowMs, entry.attempts);
        return true;
      });
    },

    summary() {
      const isHeld = heldMatcher() ?? (() => false);
      const byDomain = new Map<string, SpoolSummaryRow>();
      const bySender = new Map<string, SpoolSummaryRow>();
      const keys = new Map<string, string>();
      const keyOf = (d: string) => {
        let k = keys.get(d);
        if (k === undefined) keys.set(d, (k = domainKey(d)));
        return k;
      };
      const add = (rows: Map<string, SpoolSummaryRow>, key: string, tried: boolean, hold: boolean, created: number) => {
        let r = rows.get(key);
        if (!r) rows.set(key, (r = { key, messages: 0, deferred: 0, held: 0, oldestCreatedMs: created }));
        r.messages++;
        if (tried) r.deferred++;
        if (hold) r.held++;
        if (created < r.oldestCreatedMs) r.oldestCreatedMs = created;
      };
      const sum = { total: 0, deferred: 0, held: 0, cancelled: 0, oldestCreatedMs: null as number | null };
      // Queue values only (the entry carries every field counted here): no index, body or lease is read.
      for (const { value: e } of queue.getRange({})) {
        const envs = e.envelopes ?? [{ domain: e.domain, attempts: e.attempts }];
        let tried = e.attempts > 0;
        let hold = false;
        for (const v of envs) {
          const h = isHeld(v.domain);
          add(byDomain, keyOf(v.domain), v.attempts > 0, h, e.createdMs);
          tried ||= v.attempts > 0;
          hold ||= h;
        }
        const at = e.mailFrom.lastIndexOf('@');
        add(bySender, at < 0 ? '<>' : keyOf(e.mailFrom.slice(at + 1)), tried, hold, e.createdMs);
        sum.total++;
        if (tried) sum.deferred++;
        if (hold) sum.held++;
        if (e.cancelledMs !== undefined) sum.cancelled++;
        if (sum.oldestCreatedMs === null || e.createdMs < sum.oldestCreatedMs) sum.oldestCreatedMs = e.createdMs;
      }
      const order = (rows: Map<string, SpoolSummaryRow>) =>
        [...rows.values()].sort((a, b) => b.messages - a.messages || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
      return { ...sum, byDomain: order(byDomain), bySender: order(bySender) };
    },

    heldDomains() {
      return [...held.getRange({})].map(({ key, value }) => ({ domain: key, sinceMs: value }));
    },

    async hold(domain, nowMs) {
      checkTime(nowMs, 'nowMs');
      const key = domainKey(domain);
      checkKeyParts('-', key);
      return durable(() => {
        if (held.get(key) !== undefined) return false;
        held.put(key, nowMs);
        return true;
      });
    },

    async release(domain, nowMs) {
      checkTime(nowMs, 'nowMs');
      const key = domainKey(domain);
      checkKeyParts('-', key);
      const wasHeld = await durable(() => {
        const was = held.get(key) !== undefined;
        if (was) held.remove(key);
        return was;
      });
      if (!wasHeld) return { wasHeld, released: 0 };
      // Once that commit is visible no lease parks another entry of the domain, so this pass, on a snapshot
      // taken after it, sees every entry parked before. Ids first, writes after (no snapshot held across them).
      root.resetReadTxn();
      const ids: string[] = [];
      for (const { value: e } of queue.getRange({}))
        if ((e.envelopes ?? [e]).some((v) => domainKey(v.domain) === key)) ids.push(e.id);
      let released = 0;
      for (let i = 0; i < ids.length; i += RELEASE_SLICE) {
        const slice = ids.slice(i, i + RELEASE_SLICE);
        released += await durable(() => {
          // Held again meanwhile: left parked. A leased entry is being tried: left to its attempt.
          if (held.get(key) !== undefined) return 0;
          let n = 0;
          for (const id of slice) {
            const k = index.get(id);
            const e = k && queue.get(k);
            if (!k || !e || leases.get(id) !== undefined) continue;
            const envelopes = e.envelopes?.map((v) =>
              domainKey(v.domain) === key ? unheld({ ...v, nextAttemptMs: nowMs }) : v,
            );
            move(k, envelopes ? { ...unheld(e), envelopes } : unheld(e), nowMs, e.attempts);
            n++;
          }
          return n;
        });
      }
      return { wasHeld, released };
    },
  };
}
