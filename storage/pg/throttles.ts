// Throttles of the public routes and of inbox logins (docs/decisions.md #24): token buckets in the same
// `rate_limits` table as the credential buckets (#25), so that every node shares them and the control plane's
// sweep drops idle ones. A bucket holds at most `burst` tokens and gains `perSecond` a second.
import type { Queryable } from './client.js';

export interface Throttle {
  key: string;
  burst: number;
  perSecond: number;
}

// The bucket's tokens refilled from its last update to `now`, capped at its burst ($2, $3, $4).
const REFILLED = `least($3::float8, r.tokens
  + greatest(0, extract(epoch FROM ($2::timestamptz - r.updated_at))::float8) * $4::float8)`;

const waitFor = (tokens: number, b: Throttle) => (tokens >= 1 ? 0 : Math.max(1, Math.ceil((1 - tokens) / b.perSecond)));

/**
 * Takes a token from the bucket when it has one, in one statement (race-free): 0 when taken, else the seconds
 * until one is there (nothing taken, so a client that waits that long gets through).
 */
export async function takeThrottle(q: Queryable, b: Throttle, now: Date): Promise<number> {
  const rows = await q.query<{ tokens: number; allowed: boolean }>(
    `INSERT INTO rate_limits AS r (key, tokens, allowed, updated_at) VALUES ($1, $3::float8 - 1, true, $2)
     ON CONFLICT (key) DO UPDATE SET
       tokens = CASE WHEN ${REFILLED} >= 1 THEN ${REFILLED} - 1 ELSE ${REFILLED} END,
       allowed = ${REFILLED} >= 1,
       updated_at = greatest(excluded.updated_at, r.updated_at)
     RETURNING r.tokens, r.allowed`,
    [b.key, now, b.burst, b.perSecond],
  );
  const row = rows[0]!;
  return row.allowed ? 0 : waitFor(Number(row.tokens), b);
}

/**
 * Takes a token from every bucket or from none: 0 when taken, else the seconds until each has one. A login takes
 * its failure tokens this way before the password is checked and gives them back when it succeeds, so that
 * concurrent guesses cannot all pass a check made before any of them spent.
 */
export async function takeThrottles(q: Queryable, buckets: readonly Throttle[], now: Date): Promise<number> {
  const taken: Throttle[] = [];
  let wait = 0;
  // Key order, so that concurrent calls lock the rows in one order.
  for (const b of [...buckets].sort((x, y) => (x.key < y.key ? -1 : 1))) {
    const w = await takeThrottle(q, b, now);
    if (w === 0) taken.push(b);
    else wait = Math.max(wait, w);
  }
  if (wait > 0) await returnThrottles(q, taken, now);
  return wait;
}

/** Gives back the token takeThrottles took from each bucket (a login that succeeded spends nothing). */
export async function returnThrottles(q: Queryable, buckets: readonly Throttle[], now: Date): Promise<void> {
  for (const b of [...buckets].sort((x, y) => (x.key < y.key ? -1 : 1))) {
    await q.query(
      `UPDATE rate_limits r SET tokens = least($3::float8, ${REFILLED} + 1), allowed = true,
         updated_at = greatest($2::timestamptz, r.updated_at)
       WHERE r.key = $1`,
      [b.key, now, b.burst, b.perSecond],
    );
  }
}
