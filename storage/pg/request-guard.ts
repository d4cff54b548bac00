// What every signed request costs in Postgres after its signature checks out: consume the nonce and
// take a token from the credential's bucket, both in one statement (one round trip). With a
// credential lookup, the same statement reads the credential again: a cached credential is checked
// for revocation, expiry and changes in that round trip, and a stale one consumes nothing.
import type { Queryable } from './client.js';
import type { CredentialLookup, StoredCredential } from './credentials.js';

export interface GuardResult {
  /** false when the nonce was seen before (a replay), or when the credential is gone or changed. */
  freshNonce: boolean;
  /** false when the credential's bucket is empty. */
  allowed: boolean;
  /** tokens left after this request (when allowed) or available now (when not). */
  tokens: number;
  /** The credential as it is now, when a lookup was given; null when it no longer authenticates. */
  credential: StoredCredential | null;
}

export interface Bucket {
  burst: number;
  perSecond: number;
}

// Parameters: $1 key id, $2 now, $3 nonce, $4 nonce expiry, $5 burst, $6 refill per second, and with
// a credential $7 the sealed secret the signature was checked with.
//
// The bucket refills at perSecond up to burst; a request takes one token if at least one is there.
// A rejected request takes nothing, so a client that backs off per Retry-After gets through.
// In DO UPDATE SET every right-hand side reads the old row, so REFILL means the same in each line.
const REFILL = `least($5::float8, r.tokens + greatest(0, extract(epoch FROM ($2::timestamptz - r.updated_at))::float8) * $6::float8)`;

// The bucket's INSERT takes its row from the nonce CTE: a replayed nonce inserts nothing there, so
// a replay (refused with 401) costs the credential's owner no token; nor does a request signed with
// a credential that was revoked (or whose secret changed) since it was cached.
const guardSql = (lookup: CredentialLookup | null) => `
WITH ${lookup ? `cred AS (${lookup.sql}),` : ''} nonce AS (
  INSERT INTO request_nonces (key_id, nonce, expires_at)
  ${lookup ? 'SELECT $1::text, $3::text, $4::timestamptz FROM cred WHERE cred.secret_sealed = $7::text' : 'VALUES ($1::text, $3::text, $4::timestamptz)'}
  ON CONFLICT DO NOTHING RETURNING 1
), bucket AS (
  INSERT INTO rate_limits AS r (key, tokens, allowed, updated_at)
  SELECT $1::text, $5::float8 - 1, true, $2::timestamptz FROM nonce
  ON CONFLICT (key) DO UPDATE SET
    tokens = CASE WHEN ${REFILL} >= 1 THEN ${REFILL} - 1 ELSE ${REFILL} END,
    allowed = ${REFILL} >= 1,
    updated_at = greatest($2::timestamptz, r.updated_at)
  RETURNING r.tokens, r.allowed
)
SELECT (SELECT count(*) FROM nonce)::int AS fresh, b.tokens, b.allowed${lookup ? ', (SELECT row_to_json(cred) FROM cred) AS cred' : ''}
FROM (SELECT 1) AS one LEFT JOIN bucket b ON true`;

const sqlOf = new Map<CredentialLookup | null, string>();

export async function guardRequest(
  q: Queryable,
  g: { keyId: string; nonce: string; nonceExpiresAt: Date; now: Date; bucket: Bucket; credential?: { lookup: CredentialLookup; secretSealed: string } },
): Promise<GuardResult> {
  const lookup = g.credential?.lookup ?? null;
  let sql = sqlOf.get(lookup);
  if (sql === undefined) sqlOf.set(lookup, (sql = guardSql(lookup)));
  const params: unknown[] = [g.keyId, g.now, g.nonce, g.nonceExpiresAt, g.bucket.burst, g.bucket.perSecond];
  if (g.credential) params.push(g.credential.secretSealed);
  const rows = await q.query<{ fresh: number; tokens: number | null; allowed: boolean | null; cred?: Record<string, unknown> | string | null }>(sql, params);
  const r = rows[0];
  if (!r) throw new Error('request guard returned no row');
  const raw = typeof r.cred === 'string' ? (JSON.parse(r.cred) as Record<string, unknown>) : r.cred ?? null;
  return {
    freshNonce: r.fresh === 1,
    allowed: r.allowed === true,
    tokens: r.tokens ?? 0,
    credential: lookup && raw ? lookup.map(raw, g.keyId) : null,
  };
}

/** Forgets nonces whose timestamp window has closed and buckets idle long enough to be full again. */
export async function sweepExpired(q: Queryable, now: Date, idleBucketMs: number): Promise<void> {
  await q.query('DELETE FROM request_nonces WHERE expires_at < $1', [now]);
  await q.query('DELETE FROM rate_limits WHERE updated_at < $1', [new Date(now.getTime() - idleBucketMs)]);
}
