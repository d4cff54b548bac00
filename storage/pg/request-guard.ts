// What every signed request costs in Postgres after its signature checks out: consume the nonce and
// take a token from the credential's bucket, both in one statement (one round trip). With a
// credential lookup, the same statement reads the credential again: a cached credential is checked
// for revocation, expiry and changes in that round trip, and a stale one consumes nothing.
// Concurrent requests of different credentials share a statement (batch.ts).
import type { Db, Queryable } from './client.js';
import type { CredentialLookup, StoredCredential } from './credentials.js';
import { ALONE, batched } from './batch.js';

export interface GuardResult {
  /** false when the nonce was seen before (a replay), or when the credential is gone or changed. */
  freshNonce: boolean;
  /** false when the credential's bucket is empty. */
  allowed: boolean;
  /** tokens left after this request (when allowed) or available now (when not). */
  tokens: number;
  /** The refill rate of the bucket that answered (the organization's own, or the default): for Retry-After. */
  perSecond: number;
  /** The credential as it is now, when a lookup was given; null when it no longer authenticates. */
  credential: StoredCredential | null;
}

export interface Bucket {
  burst: number;
  perSecond: number;
}

export interface GuardInput {
  keyId: string;
  nonce: string;
  nonceExpiresAt: Date;
  now: Date;
  /** The platform's default bucket (SVC_RATE_LIMIT_BURST, SVC_RATE_LIMIT_PER_SECOND). */
  bucket: Bucket;
  /** The credential's organization, whose own limits (set by an operator) replace the default; null: none. */
  organizationId: string | null;
  /** The credential the signature was checked with, to be read again (and matched) in the statement. */
  credential?: { lookup: CredentialLookup; secretSealed: string };
}

// The bucket refills at its per-second rate up to its burst (the organization's own, else $4 and $5: the lim
// CTE) from its last update to the latest instant of its requests in the statement (the proposed row's updated_at);
// of its n requests there (`requested`), the first ones in order take a token each while a whole one is there
// (`granted`, at most n). A rejected request takes nothing, so a client that backs off per Retry-After gets
// through. In DO UPDATE SET every right-hand side reads the old row, so REFILL means the same in each line. The
// proposed row carries the limits (migration 0022) and the count (0023): a subquery of lim in each expression
// instead was a scan of the whole batch per expression and row, ~12% of the statement's time (docs/decisions.md #74).
const REFILL = `least(excluded.burst,
  r.tokens + greatest(0, extract(epoch FROM (excluded.updated_at - r.updated_at))::float8) * excluded.per_second)`;

// The bucket's INSERT takes its rows from the nonces the statement took: a replayed nonce inserts nothing there, so
// a replay (refused with 401) costs the credential's owner no token; nor does a request signed with a credential
// that was revoked (or whose secret changed) since it was cached. Two requests of one statement with the same key
// and nonce are one request and its replay, in their order.
//
// The statement's transaction commits without waiting for its WAL to reach the disk (synchronous_commit off,
// local to this transaction, set as its first rows are read): whatever a request then commits, it commits after,
// and that commit's flush takes the nonce with it, since WAL is flushed in order. What a crash of Postgres can
// lose is the nonces and tokens of requests that wrote nothing. One disk flush fewer a batch, beside the spool's
// and the accept statement's: ~8% more sendEmails a second in an A/B (docs/decisions.md #71).
//
// The credential is read by a LATERAL subquery with LIMIT 1 (key ids are unique), which Postgres cannot flatten
// into a join: each request's credential is then one probe of its unique index, whatever the table's statistics
// say. Flattened, a never-analyzed api_keys (a new deployment's, until autovacuum comes by) was planned as a nested
// loop over every key, and 264 keys cost 0.35 ms a statement; analyzed, as a hash join over all of them (#74).
//
// Parameters: arrays $1 key ids, $2 instants, $3 nonces, $6 nonce expiries, $7 organization ids, $8 sealed
// secrets (with a lookup); scalars $4 burst, $5 refill per second (the defaults). One row per request, in
// order. A key's requests share its bucket's row, written once (an upsert may not touch a row twice), so one
// sender's concurrent requests share statements as many senders' do (docs/decisions.md #90). Rows are written in
// key order, so concurrent statements take their row locks in one order and never deadlock.
const guardSql = (lookup: CredentialLookup | null) => `
WITH req AS (
  SELECT * FROM unnest($1::text[], $2::timestamptz[], $3::text[], $6::timestamptz[], $7::uuid[]${
    lookup ? ', $8::text[]' : ''
  })
    WITH ORDINALITY AS q(key_id, at, nonce, expires_at, org_id${lookup ? ', sealed' : ''}, i)
  WHERE set_config('synchronous_commit', 'off', true) IS NOT NULL
), lim AS (
  -- One row a key: its requests name one credential, so one organization.
  SELECT DISTINCT ON (req.key_id) req.key_id, coalesce(o.rate_limit_burst, $4::float8)::float8 AS burst,
    coalesce(o.rate_limit_per_second, $5::float8) AS per_second
  FROM req LEFT JOIN organizations o ON o.id = req.org_id
  ORDER BY req.key_id, req.i
), ${
  lookup
    ? `cred AS (
  SELECT req.i, c.* FROM req CROSS JOIN LATERAL (${lookup.sql('req.key_id', 'req.at')} LIMIT 1) c
), `
    : ''
}signed AS (
  SELECT req.* FROM req${lookup ? ' JOIN cred ON cred.i = req.i AND cred.secret_sealed = req.sealed' : ''}
), nonce AS (
  INSERT INTO request_nonces (key_id, nonce, expires_at)
  SELECT DISTINCT ON (key_id, nonce) key_id, nonce, expires_at FROM signed
  ORDER BY key_id, nonce, i
  ON CONFLICT DO NOTHING RETURNING key_id, nonce
), fresh AS (
  -- The requests whose nonce the statement took, each ranked among its key's in request order.
  SELECT i, key_id, at, row_number() OVER (PARTITION BY key_id ORDER BY i) AS k FROM (
    SELECT DISTINCT ON (signed.key_id, signed.nonce) signed.i, signed.key_id, signed.at
    FROM signed JOIN nonce ON nonce.key_id = signed.key_id AND nonce.nonce = signed.nonce
    ORDER BY signed.key_id, signed.nonce, signed.i
  ) first
), wanted AS (
  SELECT key_id, count(*)::int AS n, max(at) AS at FROM fresh GROUP BY key_id
), bucket AS (
  INSERT INTO rate_limits AS r (key, tokens, allowed, updated_at, burst, per_second, requested, granted)
  SELECT w.key_id, lim.burst - least(w.n, floor(lim.burst)), w.n <= floor(lim.burst), w.at, lim.burst,
    lim.per_second, w.n, least(w.n, floor(lim.burst))::int
  FROM wanted w JOIN lim ON lim.key_id = w.key_id
  ORDER BY w.key_id
  ON CONFLICT (key) DO UPDATE SET
    tokens = ${REFILL} - least(excluded.requested, floor(${REFILL})),
    allowed = excluded.requested <= floor(${REFILL}),
    granted = least(excluded.requested, floor(${REFILL}))::int,
    requested = excluded.requested,
    updated_at = greatest(excluded.updated_at, r.updated_at),
    burst = excluded.burst,
    per_second = excluded.per_second
  RETURNING r.key, r.tokens, r.granted
)
SELECT (f.i IS NOT NULL) AS fresh, f.k <= b.granted AS allowed,
  -- Left after the request when it took a token (the k-th of the key's took the k-th), else there now.
  CASE WHEN f.k <= b.granted THEN b.tokens + b.granted - f.k ELSE b.tokens END AS tokens, lim.per_second
  ${lookup ? ', row_to_json(cred) AS cred' : ''}
FROM req JOIN lim ON lim.key_id = req.key_id LEFT JOIN fresh f ON f.i = req.i
  LEFT JOIN bucket b ON b.key = req.key_id${lookup ? ' LEFT JOIN cred ON cred.i = req.i' : ''}
ORDER BY req.i`;

type Row = {
  fresh: boolean;
  tokens: number | null;
  allowed: boolean | null;
  per_second: number;
  cred?: Record<string, unknown> | string | null;
};

const sqlOf = new Map<CredentialLookup | null, string>();

async function guardMany(
  q: Queryable,
  lookup: CredentialLookup | null,
  gs: readonly GuardInput[],
): Promise<GuardResult[]> {
  let sql = sqlOf.get(lookup);
  if (sql === undefined) sqlOf.set(lookup, (sql = guardSql(lookup)));
  const { burst, perSecond } = gs[0]!.bucket;
  const params: unknown[] = [
    gs.map((g) => g.keyId),
    gs.map((g) => g.now),
    gs.map((g) => g.nonce),
    burst,
    perSecond,
    gs.map((g) => g.nonceExpiresAt),
    gs.map((g) => g.organizationId),
  ];
  if (lookup) params.push(gs.map((g) => g.credential!.secretSealed));
  const rows = await q.query<Row>(sql, params);
  if (rows.length !== gs.length)
    throw new Error(`request guard returned ${rows.length} rows for ${gs.length} requests`);
  return rows.map((r, i) => {
    const raw = typeof r.cred === 'string' ? (JSON.parse(r.cred) as Record<string, unknown>) : (r.cred ?? null);
    return {
      freshNonce: r.fresh === true,
      allowed: r.allowed === true,
      tokens: r.tokens ?? 0,
      perSecond: Number(r.per_second),
      credential: lookup && raw ? lookup.map(raw, gs[i]!.keyId) : null,
    };
  });
}

const sameBucket = (a: Bucket, b: Bucket) => a.burst === b.burst && a.perSecond === b.perSecond;

// One batcher per database and credential kind (the lookup is part of the statement), one statement
// in flight (see messages.ts). Requests with another bucket shape (none today) go alone. The map lives
// on the storage handle (storage/caches.ts).
export type GuardBatches = Map<CredentialLookup | null, (g: GuardInput) => Promise<GuardResult>>;

export async function guardRequest(
  { db, caches }: { db: Db; caches: { guard: GuardBatches } },
  g: GuardInput,
): Promise<GuardResult> {
  const lookup = g.credential?.lookup ?? null;
  let guard = caches.guard.get(lookup);
  if (!guard) {
    const one = async (x: GuardInput) => (await guardMany(db, lookup, [x]))[0]!;
    guard = batched<GuardInput, GuardResult>(
      async (xs) =>
        xs.every((x) => sameBucket(x.bucket, xs[0]!.bucket)) ? guardMany(db, lookup, xs) : xs.map(() => ALONE),
      one,
      { max: 128, inFlight: 1 },
    );
    caches.guard.set(lookup, guard);
  }
  return guard(g);
}

/**
 * Once a nonce's timestamp window has closed by this node's clock AND the database's, and five minutes more
 * have passed, nobody accepts its request again and it goes (issue 15 item 6): a node whose clock runs ahead
 * must not forget a nonce that a node running on time would still take, so that one request is never
 * accepted twice while node clocks are within five minutes of the database's. Idle buckets go too: refilled
 * by now, they are the same as no row.
 */
export async function sweepExpired(q: Queryable, now: Date, idleBucketMs: number): Promise<void> {
  await q.query("DELETE FROM request_nonces WHERE expires_at < least($1::timestamptz, now()) - interval '5 minutes'", [
    now,
  ]);
  await q.query('DELETE FROM rate_limits WHERE updated_at < $1', [new Date(now.getTime() - idleBucketMs)]);
}
