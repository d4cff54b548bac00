// Turns the result of one attempt into the message's next state (pure, docs/conventions.md #6), and writes
// outcomes to Postgres in batches: while one batch commits, the next accumulates, so the number of
// transactions follows the commit latency rather than the number of deliveries (group commit).
import type { Logger } from 'pino';
import { isTransientConflict, type Db } from '../../storage/pg/client.js';
import { recordOutcomes, type Outcome, type OutcomeStatus } from '../../storage/pg/deliveries.js';
import { classify, type BounceClass } from './bounce-classify.js';
import { nextAttempt } from './retry.js';
import type { SendResult, Transport } from './pool.js';

/**
 * Permanent failures that say the address itself is bad get a `hard_bounce` suppression (docs/api.md §6.4).
 * Refusals of this message's content or of us (spam, policy, authentication, size) do not: the
 * address is fine and the next message may well pass.
 */
export const SUPPRESSING: ReadonlySet<BounceClass> = new Set([
  'unknown_user',
  'bad_domain',
  'mailbox_full',
  'relay_denied',
  'other',
]);

export interface Decision {
  status: OutcomeStatus;
  detail: Record<string, unknown>;
  suppress?: Outcome['suppress'];
  /** For `deferred`: when the spool entry becomes due again. */
  retryAtMs?: number;
}

/** The transport facts of an attempt as event detail fields (optional ones only when they say something). */
export function transportDetail(t: Transport): Record<string, unknown> {
  return {
    host: t.host,
    ip: t.ip,
    tls: t.tls,
    tlsVersion: t.tlsVersion,
    tlsCipher: t.tlsCipher,
    tlsVerified: t.tlsVerified,
    tlsPolicy: t.tlsPolicy,
    ...(t.tlsPolicyMode ? { tlsPolicyMode: t.tlsPolicyMode } : {}),
    ...(t.tlsFailures?.length ? { tlsFailures: t.tlsFailures } : {}),
    ...(t.tlsPolicyNote ? { tlsPolicyNote: t.tlsPolicyNote } : {}),
    ...(t.refusedMx?.length ? { refusedMx: t.refusedMx } : {}),
  };
}

/** What an attempt means: `attempts` counts this one; `delaysMs` is SVC_RETRY_DELAYS. */
export function decide(
  result: SendResult,
  to: string,
  attempts: number,
  nowMs: number,
  delaysMs: readonly number[],
): Decision {
  // Issue 19: where the attempt went and how (MX host and IP, TLS version and cipher, what verified the
  // certificate, which policy applied), in every event; docs/api.md, message events.
  const base = { attempt: attempts, ...transportDetail(result.transport), host: result.host };
  if (result.kind === 'accepted') {
    return { status: 'delivered', detail: { ...base, reply: result.reply, tls: result.tls } };
  }
  const c = classify(result.kind === 'reply' ? result.reply : { connectionError: result.error });
  const detail: Record<string, unknown> = {
    ...base,
    class: c.class,
    message: c.message,
    // The remote reply, verbatim (issue 5): what a customer's support needs to see.
    ...(result.kind === 'reply' ? { reply: result.reply.message } : { error: result.error }),
  };
  if (c.action === 'fail') {
    return {
      status: 'bounced',
      detail,
      suppress: SUPPRESSING.has(c.class)
        ? {
            address: to,
            reason: 'hard_bounce',
            detail: (result.kind === 'reply' ? result.reply.message : c.message).slice(0, 500),
          }
        : undefined,
    };
  }
  const next = nextAttempt({ attempts, firstAttemptMs: nowMs, nowMs, delaysMs });
  if (next.action === 'retry')
    return {
      status: 'deferred',
      detail: { ...detail, nextAttemptAt: new Date(next.atMs).toISOString() },
      retryAtMs: next.atMs,
    };
  return {
    status: 'failed',
    detail: { ...detail, gaveUpAfter: attempts },
    suppress: {
      address: to,
      reason: 'soft_bounce_max',
      detail: `gave up after ${attempts} attempts: ${c.message}`.slice(0, 500),
    },
  };
}

/** Attempts of one batch that Postgres aborted for a conflict with another statement (isTransientConflict). */
const CONFLICT_ATTEMPTS = 4;

export function createOutcomeWriter(db: Db, log: Logger, maxBatch = 500) {
  let pending: { outcome: Outcome; done: (err?: Error) => void }[] = [];
  let flushing: Promise<void> | null = null;

  // A batch refused for a deadlock or a serialization failure committed nothing and is written again at once:
  // failing it would leave messages already delivered to be sent again when their lease ends.
  async function recordWithRetries(outcomes: Outcome[]): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await recordOutcomes(db, outcomes);
      } catch (err) {
        if (attempt >= CONFLICT_ATTEMPTS || !isTransientConflict(err)) throw err;
        log.warn(
          { err, count: outcomes.length, attempt },
          'delivery outcomes met a conflicting statement; writing again',
        );
      }
    }
  }

  async function flushLoop() {
    while (pending.length) {
      const batch = pending.slice(0, maxBatch);
      pending = pending.slice(batch.length);
      try {
        await recordWithRetries(batch.map((b) => b.outcome));
        for (const b of batch) b.done();
      } catch (err) {
        log.error({ err, count: batch.length }, 'recording delivery outcomes failed');
        for (const b of batch) b.done(err as Error);
      }
    }
    flushing = null;
  }

  return {
    /** Resolves once the outcome is committed; rejects when its batch failed. */
    write(outcome: Outcome): Promise<void> {
      const p = new Promise<void>((resolve, reject) =>
        pending.push({ outcome, done: (err) => (err ? reject(err) : resolve()) }),
      );
      // The first write of a quiet period waits one turn so that writes of the same turn share the batch.
      flushing ??= new Promise<void>((r) => setImmediate(r)).then(flushLoop);
      return p;
    },
    async idle(): Promise<void> {
      while (flushing) await flushing;
    },
  };
}
