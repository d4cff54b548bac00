// The webhook dispatcher (issue 6 item 2), run by the MTA role next to the delivery worker: takes
// due attempts from webhook_deliveries (written by the fan-out in the transaction of their event),
// signs them per Standard Webhooks and POSTs them, then records each attempt and schedules the next.
//
// - At-least-once: an attempt is claimed with a lease (next_attempt_at moved ahead) before its
//   request is made, and recorded after; a crash in between makes it due again when the lease ends,
//   and a restart finds every pending attempt where it was (they are rows).
// - Isolation: at most `perEndpoint` requests per endpoint are in flight, and the claim skips
//   endpoints at that limit, so a slow or dead endpoint holds at most that many of the `maxInFlight`
//   slots and never delays another endpoint or project. The limits hold per dispatcher (per MTA node).
// - Times come from ctx.clock (the schedule, webhook-timestamp, attempted_at), so tests advance a
//   clock instead of sleeping; latency is measured on the monotonic clock, as it is a duration.
import { randomBytes } from 'node:crypto';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import {
  claimWebhookDeliveries,
  recordWebhookAttempt,
  releaseWebhookDeliveries,
  webhookSecretAad,
  type AttemptResult,
  type ClaimedDelivery,
} from '../../storage/pg/webhooks.js';
import { destinationOf } from '../../mail/webhook-target.js';
import { postWebhook, type PostResult } from './post.js';
import { nextWebhookAttempt } from './retry.js';
import { webhookHeaders } from '../../mail/webhook-sign.js';
import { pollLoop } from '../poll-loop.js';
import type { MtaMetrics } from '../metrics.js';

export interface WebhookDispatcherOptions {
  /** How often due attempts are looked for when the last look found none. */
  pollMs?: number;
  /** docs/decisions.md #5: an endpoint that has not answered in this long has failed the attempt. */
  timeoutMs?: number;
  /** Requests in flight at once, across endpoints. */
  maxInFlight?: number;
  /** Requests in flight at once to one endpoint. */
  perEndpoint?: number;
  /** How long a claimed attempt stays away from the schedule; longer than timeoutMs. */
  leaseMs?: number;
  /** How long stop() lets requests in progress finish before it aborts them and gives them back. */
  drainMs?: number;
  /** In [0, 1): the jitter of the retry schedule (tests may fix it). */
  random?: () => number;
  /** The service's MTA metrics (bin/start.ts); none: nothing is counted. */
  metrics?: MtaMetrics;
}

/** The body of docs/decisions.md #5. */
function webhookBody(d: ClaimedDelivery): string {
  return JSON.stringify({
    type: d.eventType,
    createdAt: new Date(d.eventAt).toISOString(),
    data: {
      messageId: d.messageId,
      projectId: d.projectId,
      to: d.to,
      from: d.from,
      subject: d.subject,
      tags: d.tags,
      metadata: d.metadata,
      detail: d.detail ?? null,
    },
  });
}

export function startWebhookDispatcher(ctx: Context, storage: Storage, opts: WebhookDispatcherOptions = {}) {
  const { clock, log, resolver, config } = ctx;
  const { db, sealer } = storage;
  const pollMs = opts.pollMs ?? 500;
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const maxInFlight = opts.maxInFlight ?? 64;
  const perEndpoint = opts.perEndpoint ?? 2;
  const leaseMs = Math.max(opts.leaseMs ?? 60_000, timeoutMs + 5_000);
  const drainMs = opts.drainMs ?? timeoutMs;
  const random = opts.random ?? (() => randomBytes(6).readUIntBE(0, 6) / 2 ** 48);

  /** Attempt id → its endpoint, for every request in progress here. */
  const inFlight = new Map<string, string>();
  const busy = new Map<string, number>();
  const aborter = new AbortController();
  const loop = pollLoop(
    async () => {
      let claimed = 0;
      try {
        const room = maxInFlight - inFlight.size;
        if (room > 0) {
          const now = clock.now();
          const batch = await claimWebhookDeliveries(db, {
            now: new Date(now),
            limit: room,
            perEndpoint,
            busy,
            inFlight: [...inFlight.keys()],
            leaseUntil: new Date(now + leaseMs),
          });
          claimed = batch.length;
          for (const d of batch) start(d);
        }
      } catch (err) {
        log.error({ err }, 'claiming webhook deliveries failed');
      }
      // Found some: more may be due. Found none: wait.
      return claimed > 0 && inFlight.size < maxInFlight;
    },
    pollMs,
    clock,
  );

  // The MTA's writers of events in this process say when they wrote attempts (docs/decisions.md #88).
  const stopWaking = storage.webhooksDue.onWake(loop.wake);

  function start(d: ClaimedDelivery) {
    inFlight.set(d.id, d.endpointId);
    busy.set(d.endpointId, (busy.get(d.endpointId) ?? 0) + 1);
    attempt(d)
      .catch((err) =>
        log.error({ err, delivery: d.id }, 'webhook attempt failed unexpectedly; retried when its lease ends'),
      )
      .finally(() => {
        inFlight.delete(d.id);
        const n = (busy.get(d.endpointId) ?? 1) - 1;
        if (n > 0) busy.set(d.endpointId, n);
        else busy.delete(d.endpointId);
        // A slot is free: the endpoint (or another) may have work waiting, which a poll running now may have skipped.
        loop.wake();
      });
  }

  async function attempt(d: ClaimedDelivery) {
    const at = clock.now();
    const url = new URL(d.url);
    const destination = await destinationOf(url, resolver, config.allowPrivateWebhooks);
    const secret = openSecret(d);
    let result: PostResult;
    if (!destination.ok) result = { kind: 'failed', error: destination.error, latencyMs: 0 };
    else if (secret === null)
      result = { kind: 'failed', error: 'the endpoint secret does not open with this master key', latencyMs: 0 };
    else {
      const body = webhookBody(d);
      result = await postWebhook({
        url,
        address: destination.address,
        family: destination.family,
        body,
        timeoutMs,
        signal: aborter.signal,
        headers: webhookHeaders(secret, d.webhookId, Math.floor(at / 1000), body),
      });
    }
    if (aborter.signal.aborted && result.kind === 'failed') {
      // Cut short by stop(): not the endpoint's failure. Given back, due at once on the next start.
      await releaseWebhookDeliveries(db, [d.id], new Date(clock.now()));
      return;
    }
    const recorded = outcome(d, result, at);
    await recordWebhookAttempt(db, recorded);
    opts.metrics?.webhookAttempt(recorded.status);
    log.debug({ delivery: d.id, endpoint: d.endpointId, attempt: d.attempt, result }, 'webhook attempt');
  }

  /** null when the master key changed since the endpoint was registered (the operator's to fix; the attempt fails). */
  function openSecret(d: ClaimedDelivery): string | null {
    try {
      return sealer.open(d.secretSealed, webhookSecretAad(d.endpointId));
    } catch (err) {
      log.error({ err, endpoint: d.endpointId }, 'webhook secret does not open');
      return null;
    }
  }

  function outcome(d: ClaimedDelivery, r: PostResult, at: number): AttemptResult {
    const base = { id: d.id, latencyMs: r.latencyMs, attemptedAt: new Date(at) };
    const statusCode = r.kind === 'answered' ? r.statusCode : null;
    if (statusCode !== null && statusCode >= 200 && statusCode < 300)
      return { ...base, status: 'succeeded', statusCode, error: null };
    const error = r.kind === 'answered' ? `HTTP ${r.statusCode}` : r.error;
    const next = nextWebhookAttempt(d.attempt, new Date(d.eventAt).getTime(), clock.now(), random());
    if (next.action === 'give_up') return { ...base, status: 'failed', statusCode, error };
    return { ...base, status: 'retrying', statusCode, error, nextAt: new Date(next.atMs) };
  }

  loop.schedule(0);

  return {
    /** When the last finished look for due attempts began (PollLoop.polledAt). */
    polledAt: loop.polledAt,
    /** SIGTERM: take no more work; requests in progress get drainMs, then are aborted and given back. */
    async stop(): Promise<void> {
      stopWaking();
      loop.stop();
      const deadline = Date.now() + drainMs;
      while ((inFlight.size || loop.polling()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      if (inFlight.size) {
        log.warn(
          { inFlight: inFlight.size },
          'webhook requests still in progress at stop: aborted, retried at the next start',
        );
        aborter.abort();
        while (inFlight.size) await new Promise((r) => setTimeout(r, 10));
      }
    },
  };
}

export type WebhookDispatcher = ReturnType<typeof startWebhookDispatcher>;
