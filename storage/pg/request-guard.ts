// What every signed request costs in Postgres after its signature checks out: consume the nonce and
// take a token from the credential's bucket, both in one statement (one round trip).
import type { Queryable } from './client.js';

export interface GuardResult {
  /** false when the nonce was seen before (a replay). */
  freshNonce: boolean;
  /** false when the credential's bucket is empty. */
  allowed: boolean;
  /** tokens left after this request (when allowed) or available now (when not). */
  tokens: number;
}

export interface Bucket {
  burst: number;
  perSecond: number;
}

// The bucket refills at perSecond up to burst; a request takes one token if at least one is there.
// A rejected request takes nothing, so a client that backs off per Retry-After gets through.
// In DO UPDATE SET every right-hand side reads the old row, so REFILL means the same in each line.
const REFILL = `least($5::float8, r.tokens + greatest(0, extract(epoch FROM ($4::timestamptz - r.updated_at))::float8) * $6::float8)`;

// The bucket's INSERT takes its row from the nonce CTE: a replayed nonce inserts nothing there, so
// a replay (refused with 401) costs the credential's owner no token.
const SQL = `
WITH nonce AS (
  INSERT INTO request_nonces (key_id, nonce, expires_at) VALUES ($1, $2, $3)
  ON CONFLICT DO NOTHING RETURNING 1
), bucket AS (
  INSERT INTO rate_limits AS r (key, tokens, allowed, updated_at)
  SELECT $1, $5::float8 - 1, true, $4::timestamptz FROM nonce
  ON CONFLICT (key) DO UPDATE SET
    tokens = CASE WHEN ${REFILL} >= 1 THEN ${REFILL} - 1 ELSE ${REFILL} END,
    allowed = ${REFILL} >= 1,
    updated_at = greatest($4::timestamptz, r.updated_at)
  RETURNING r.tokens, r.allowed
)
SELECT (SELECT count(*) FROM nonce)::int AS fresh, b.tokens, b.allowed FROM (SELECT 1) AS one LEFT JOIN bucket b ON true`;

export async function guardRequest(
  q: Queryable,
  g: { keyId: string; nonce: string; nonceExpiresAt: Date; now: Date; bucket: Bucket },
): Promise<GuardResult> {
  const rows = await q.query<{ fresh: number; tokens: number | null; allowed: boolean | null }>(SQL, [
    g.keyId, g.nonce, g.nonceExpiresAt, g.now, g.bucket.burst, g.bucket.perSecond,
  ]);
  const r = rows[0];
  if (!r) throw new Error('request guard returned no row');
  return { freshNonce: r.fresh === 1, allowed: r.allowed === true, tokens: r.tokens ?? 0 };
}

/** Forgets nonces whose timestamp window has closed and buckets idle long enough to be full again. */
export async function sweepExpired(q: Queryable, now: Date, idleBucketMs: number): Promise<void> {
  await q.query('DELETE FROM request_nonces WHERE expires_at < $1', [now]);
  await q.query('DELETE FROM rate_limits WHERE updated_at < $1', [new Date(now.getTime() - idleBucketMs)]);
}
