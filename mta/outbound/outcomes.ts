// Turns the result of one attempt into the message's next state (pure, docs/conventions.md #6), and writes
// outcomes to Postgres in batches: while one batch commits, the next accumulates, so the number of
// transactions follows the commit latency rather than the number of deliveries (group commit).
import { timeOrderedUuid } from '../../mail/uuid.js';
import type { Logger } from 'pino';
import { isConnectionLoss, isTransientConflict, type Db } from '../../storage/pg/client.js';
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

export interface OutcomeWriterOptions {
  maxBatch?: number;
  /**
   * How long a batch whose connection to Postgres was lost (isConnectionLoss) is written again before it fails:
   * well inside the delivery lease, after which its messages would be sent again anyway. Default 5 minutes.
   */
  retryForMs?: number;
  /** The waits between those writes: the first, doubled each time up to the last. Default 250 ms to 5 s. */
  retryDelayMs?: { first: number; max: number };
  /** How long a batch of fewer than FULL_BATCH outcomes waits for more before it is written (default LINGER_MS). */
  lingerMs?: number;
  /** Called once a batch that wrote webhook attempts has committed (Storage.webhooksDue's wake). */
  onWebhooksDue?: () => void;
}

/**
 * A batch waits up to LINGER_MS for more outcomes unless FULL_BATCH are already there. Group commit alone (the next
 * batch forms while one is written) gave batches of ~8 outcomes at 1 kB but ~2 at 100 kB, where deliveries come
 * slower, and each statement has a fixed cost in Postgres (it also updates the capability's sent count, one row
 * that every batch locks): at 100 kB the outcome statements cost Postgres about 0.4 ms a message. The messages are
 * delivered already; their outcome shows a few milliseconds later, and their leases are held that much longer.
 */
const LINGER_MS = 20;
const FULL_BATCH = 64;

export function createOutcomeWriter(db: Db, log: Logger, opts: OutcomeWriterOptions = {}) {
  const maxBatch = opts.maxBatch ?? 500;
  const retryForMs = opts.retryForMs ?? 5 * 60_000;
  const delays = opts.retryDelayMs ?? { first: 250, max: 5_000 };
  const lingerMs = opts.lingerMs ?? LINGER_MS;
  let pending: { outcome: Outcome; done: (err?: Error) => void }[] = [];
  let flushing: Promise<void> | null = null;
  /** When a stop set it: the time after which a lost connection is no longer waited out. */
  let giveUpAt = Infinity;

  // Failing a batch leaves its messages, already delivered, to be sent again when their lease ends. So:
  // - one refused for a deadlock or a serialization failure committed nothing and is written again at once;
  // - one whose connection was lost (a Postgres restart, a failover) is written again on a new connection until
  //   retryForMs has passed. It may have committed before the loss; its event ids are the same each time, and
  //   the statement applies an outcome whose event is already recorded no second time (docs/decisions.md #64).
  async function recordWithRetries(outcomes: Outcome[]): Promise<number> {
    let conflicts = 0;
    let lostSince: number | null = null;
    let delay = delays.first;
    for (;;) {
      try {
        return await recordOutcomes(db, outcomes);
      } catch (err) {
        if (isTransientConflict(err) && ++conflicts < CONFLICT_ATTEMPTS) {
          log.warn(
            { err, count: outcomes.length, attempt: conflicts },
            'delivery outcomes met a conflicting statement; writing again',
          );
          continue;
        }
        if (!isConnectionLoss(err)) throw err;
        lostSince ??= Date.now();
        if (Date.now() - lostSince >= retryForMs || Date.now() >= giveUpAt) throw err;
        log.warn(
          { err, count: outcomes.length, retryInMs: delay },
          'delivery outcomes: the connection to Postgres was lost; writing again',
        );
        await new Promise((r) => setTimeout(r, delay));
        delay = Math.min(delay * 2, delays.max);
      }
    }
  }

  /** Resolves after lingerMs, or once FULL_BATCH outcomes wait (write() calls `wake`). */
  let wake: (() => void) | null = null;
  function linger(): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        wake = null;
        resolve();
      };
      const timer = setTimeout(done, lingerMs);
      wake = done;
    });
  }

  async function flushLoop() {
    while (pending.length) {
      if (pending.length < FULL_BATCH) await linger();
      const batch = pending.slice(0, maxBatch);
      pending = pending.slice(batch.length);
      try {
        const hooks = await recordWithRetries(batch.map((b) => b.outcome));
        for (const b of batch) b.done();
        if (hooks > 0) opts.onWebhooksDue?.();
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
      // Its event id, made once: the same on every write of its batch.
      const o = outcome.eventId ? outcome : { ...outcome, eventId: timeOrderedUuid() };
      const p = new Promise<void>((resolve, reject) =>
        pending.push({ outcome: o, done: (err) => (err ? reject(err) : resolve()) }),
      );
      if (pending.length >= FULL_BATCH) wake?.();
      // The first write of a quiet period starts the loop, which lingers before its first batch.
      flushing ??= flushLoop();
      return p;
    },
    /** Resolves once nothing is being written; a lost connection is waited out until `giveUpBy` at the latest. */
    async idle(giveUpBy = Infinity): Promise<void> {
      giveUpAt = giveUpBy;
      while (flushing) await flushing;
    },
  };
}
