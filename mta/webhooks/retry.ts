// When a failed webhook attempt is tried again (pure, docs/conventions.md #6). docs/decisions.md #5: a non-2xx
// answer, a timeout (10 s) or a connection error is retried with exponential backoff for about 24 h.
//
// The delay before attempt n+1 is drawn uniformly from [0, min(cap, base · 2^(n-1))] ("full jitter":
// endpoints that failed together, say during their outage, do not all come back at the same
// instant). Giving up is decided by time, not by a count, so jitter cannot shorten the window: the
// attempts go on until 24 h after the event, the last one at that mark, and a failure then is final.

export interface RetryPolicy {
  baseMs: number;
  capMs: number;
  /** How long after the event attempts go on. */
  windowMs: number;
}

export const WEBHOOK_RETRY: RetryPolicy = { baseMs: 5_000, capMs: 4 * 3_600_000, windowMs: 24 * 3_600_000 };

export type Next = { action: 'retry'; atMs: number } | { action: 'give_up' };

/**
 * After attempt `attempt` (1 for the first) failed at `nowMs`, for an event of `eventMs`:
 * `random` is in [0, 1).
 */
export function nextWebhookAttempt(
  attempt: number,
  eventMs: number,
  nowMs: number,
  random: number,
  p: RetryPolicy = WEBHOOK_RETRY,
): Next {
  const deadline = eventMs + p.windowMs;
  if (nowMs >= deadline) return { action: 'give_up' };
  const ceiling = Math.min(p.capMs, p.baseMs * 2 ** Math.min(attempt - 1, 52));
  // At least a second: a draw near zero must not turn into a hot loop against a failing endpoint.
  const delay = Math.max(1_000, Math.floor(random * ceiling));
  return { action: 'retry', atMs: Math.min(nowMs + delay, deadline) };
}
