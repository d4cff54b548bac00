// Pure: when to try a deferred message again, or that it is time to give up (docs/conventions.md #6). The list is
// SVC_RETRY_DELAYS (config.retryDelaysMs): the delays *between* attempts, so n delays allow n + 1
// attempts. The default, docs/decisions.md #16, spans about 5 days from the first attempt to the last,
// the give-up time RFC 5321 §4.5.4.1 asks for ("at least 4-5 days").
//
// Deterministic, no jitter: the spool key [nextAttemptMs, domain, id] *is* the schedule (docs/conventions.md #8),
// so the time returned here is exactly when the entry becomes due, and tests assert exact times.
// Jitter spreads a thundering herd; ours is already spread by each message's own first attempt time,
// and per-domain pools and their concurrency limits keep a burst from hitting one receiver at once.
export interface NextAttemptInput {
  /** Attempts made so far, this failed one included: 1 after the first try. */
  attempts: number;
  /**
   * When the first attempt was made. Not used by the arithmetic: the schedule counts attempts and
   * measures each delay from now. Anchoring it to the first attempt instead would, after an outage of
   * the MTA, find several scheduled times already past and retry back to back; counting attempts
   * guarantees the receiver every attempt the operator configured, however late they come.
   */
  firstAttemptMs: number;
  /** The time the failed attempt ended (the injected clock). */
  nowMs: number;
  /** config.retryDelaysMs. */
  delaysMs: readonly number[];
}

export type NextAttempt = { action: 'retry'; atMs: number } | { action: 'give_up' };

/** After the n-th failed attempt, wait delaysMs[n - 1]; once the list is used up, give up. */
export function nextAttempt(opts: NextAttemptInput): NextAttempt {
  const { attempts, nowMs, delaysMs } = opts;
  // Programming errors, not remote input: a caller that has made no attempt has nothing to schedule.
  if (!Number.isSafeInteger(attempts) || attempts < 1)
    throw new RangeError(`retry: attempts must be an integer ≥ 1, got ${attempts}`);
  if (!Number.isFinite(nowMs)) throw new RangeError(`retry: nowMs must be a finite time, got ${nowMs}`);
  const delay = delaysMs[attempts - 1];
  if (delay === undefined) return { action: 'give_up' };
  if (!Number.isFinite(delay) || delay < 0)
    throw new RangeError(`retry: delaysMs[${attempts - 1}] is not a duration: ${delay}`);
  return { action: 'retry', atMs: nowMs + delay };
}
