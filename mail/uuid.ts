// RFC 9562 §4: a UUID in its text form, 8-4-4-4-12 hex digits, either case. Ids of rows and messages are
// UUIDs; a string of any other shape names nothing (and must not reach a ::uuid cast in Postgres).
import { randomFillSync } from 'node:crypto';
import { v7 } from 'uuid';

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (s: string): boolean => UUID_RE.test(s);

// Random octets drawn POOL_IDS ids at a time: uuid's own v7 asks WebCrypto's getRandomValues for 16 octets per id,
// ~2.0 µs an id here against ~0.35 with the pool (a send makes two or three ids; the draws were ~2% of the control's
// CPU in a profile of sendEmail). node:crypto's randomUUID pools its random octets the same way.
const POOL_IDS = 256;
const pool = Buffer.alloc(16 * POOL_IDS);
let drawn = POOL_IDS;
// RFC 9562 §6.2 method 1: the millisecond of the last id and its counter, as uuid keeps them when it draws its own
// random octets (given them, it keeps none, so they are kept here).
let lastMs = -Infinity;
let seq = 0;

/**
 * A new id for what is written in time order and looked up by id: a message and its events. An RFC 9562 §5.7
 * UUIDv7: 48 bits of Unix time in milliseconds, then a counter that starts at a random value each millisecond and
 * counts up within it (§6.2, method 1), then random bits; so ids made one after another in a process sort in that
 * order. Why not random (v4): the spool keeps a message's body, index entry and lease in LMDB B-trees keyed by its
 * id, and Postgres the messages and message_events primary keys in B-tree indexes; ids in time order land on the
 * last leaf pages of each tree, where random ones dirty a page of each tree per message (docs/decisions.md #73).
 * Nothing is granted to whoever knows an id (the return path carries a MAC, #53), and the time it tells is the
 * message's created_at. uuid is pinned (package.json): test/mail/uuid.test.ts checks the layout and the order.
 */
export function timeOrderedUuid(): string {
  if (drawn === POOL_IDS) {
    randomFillSync(pool);
    drawn = 0;
  }
  const random = pool.subarray(16 * drawn, 16 * ++drawn);
  const now = Date.now();
  if (now > lastMs) {
    // A new millisecond: the counter starts at 31 random bits (uuid's own choice), room to count up within it.
    seq = ((random[6]! & 0x7f) << 24) | (random[7]! << 16) | (random[8]! << 8) | random[9]!;
    lastMs = now;
  } else {
    // The same millisecond (or the clock went back): count up; a counter that wraps borrows the next millisecond,
    // as uuid does, so the order holds.
    seq = (seq + 1) | 0;
    if (seq === 0) lastMs++;
  }
  return v7({ msecs: lastMs, seq, random });
}
