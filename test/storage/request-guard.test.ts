// The request guard's statement (storage/pg/request-guard.ts) on one connection: it consumes a nonce once, and its
// transaction's asynchronous commit (docs/decisions.md #71) stays its own. A pooled connection goes on to run other
// statements, the accept statement among them, whose commits must wait for the disk as before.
import t, { type Test } from 'tap';
import type { Db } from '../../storage/pg/client.js';
import { guardRequest, type GuardBatches, type GuardInput } from '../../storage/pg/request-guard.js';
import { openTestDb } from '../helpers/database.js';

/** One connection, so that the statement after the guard's runs where the guard's did. */
const oneConnection = (t: Test): Promise<Db> => openTestDb(t, 1);

const input = (nonce: string, now: Date): GuardInput => ({
  keyId: 'key-1',
  nonce,
  nonceExpiresAt: new Date(now.getTime() + 600_000),
  now,
  bucket: { burst: 2, perSecond: 1 },
  organizationId: null,
});

t.test('the guard consumes a nonce once, and its asynchronous commit stays in its own transaction', async (t) => {
  const db = await oneConnection(t);
  const storage = { db, caches: { guard: new Map() as GuardBatches } };
  const setting = async () =>
    (await db.query<{ s: string }>("SELECT current_setting('synchronous_commit') AS s"))[0]!.s;
  t.equal(await setting(), 'on', 'the connection commits synchronously to begin with');

  const now = new Date();
  const first = await guardRequest(storage, input('nonce-a', now));
  t.ok(first.freshNonce && first.allowed, 'a new nonce passes and takes a token');
  t.equal(await setting(), 'on', 'the next statement on the connection commits synchronously again');

  const again = await guardRequest(storage, input('nonce-a', now));
  t.notOk(again.freshNonce, 'the same nonce again is a replay: it was committed');
  const rows = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM request_nonces WHERE nonce = $1', [
    'nonce-a',
  ]);
  t.same(rows, [{ n: 1 }], 'one row for the nonce');

  const second = await guardRequest(storage, input('nonce-b', now));
  const third = await guardRequest(storage, input('nonce-c', now));
  t.ok(second.allowed, 'the burst of two allows a second request');
  t.notOk(third.allowed, 'and refuses a third in the same instant');
  t.equal(await setting(), 'on', 'still synchronous after a refusal');
});

t.test(
  "one credential's concurrent requests share a statement, and its bucket hands out tokens in order",
  async (t) => {
    const db = await oneConnection(t);
    const storage = { db, caches: { guard: new Map() as GuardBatches } };
    const now = new Date();
    const burst3 = (keyId: string, nonce: string, at = now): GuardInput => ({
      ...input(nonce, at),
      keyId,
      bucket: { burst: 3, perSecond: 1 },
    });
    // Made in one turn of the event loop, the calls go as one statement (storage/pg/batch.ts).
    const results = await Promise.all([
      guardRequest(storage, burst3('key-a', 'n-1')),
      guardRequest(storage, burst3('key-a', 'n-2')),
      guardRequest(storage, burst3('key-b', 'n-1')),
      guardRequest(storage, burst3('key-a', 'n-2')),
      guardRequest(storage, burst3('key-a', 'n-3')),
      guardRequest(storage, burst3('key-a', 'n-4')),
      guardRequest(storage, burst3('key-a', 'n-5')),
    ]);
    t.same(
      results.map((r) => [r.freshNonce, r.allowed, r.tokens]),
      [
        [true, true, 2],
        [true, true, 1],
        [true, true, 2],
        [false, false, 0],
        [true, true, 0],
        [true, false, 0],
        [true, false, 0],
      ],
      "key-a's three tokens go to its first three fresh requests in order; its repeated nonce is a replay; key-b's own",
    );
    const rows = await db.query<{ key: string; tokens: number; requested: number; granted: number }>(
      'SELECT key, tokens, requested, granted FROM rate_limits ORDER BY key',
    );
    t.same(
      rows,
      [
        { key: 'key-a', tokens: 0, requested: 5, granted: 3 },
        { key: 'key-b', tokens: 2, requested: 1, granted: 1 },
      ],
      "one upsert a key: key-a's five fresh requests were one statement's",
    );

    // Two seconds later two tokens have come back: of three requests, two pass.
    const later = new Date(now.getTime() + 2_000);
    const refilled = await Promise.all(
      ['n-6', 'n-7', 'n-8'].map((n) => guardRequest(storage, burst3('key-a', n, later))),
    );
    t.same(
      refilled.map((r) => [r.allowed, r.tokens]),
      [
        [true, 1],
        [true, 0],
        [false, 0],
      ],
      'the refill is shared out in order too',
    );
    t.equal(refilled[2]!.perSecond, 1, "a refused request learns the bucket's rate, for Retry-After");
  },
);
