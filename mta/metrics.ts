// The MTA's Prometheus metrics (docs/operations.md, "Metrics"), registered on the Registry of one service
// instance (bin/start.ts makes it), so that two services in one process never share a counter. The queue
// gauges are read from the LMDB spool at scrape time and the webhook backlog from Postgres, so they are as
// fresh as the scrape and cost nothing between scrapes.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from '../config/context.js';
import type { Storage } from '../storage/index.js';
import { webhookBacklog } from '../storage/pg/metrics.js';

/**
 * How the cluster's primary (bin/cluster.ts) adds up a gauge every MTA worker reads from state they share (the
 * spool on disk, the webhook rows): each worker reads the same value, so the sum would count it once per worker.
 */
const SHARED = 'max' as const;

export type AttemptOutcome = 'delivered' | 'deferred' | 'bounced' | 'failed';
export type WebhookOutcome = 'succeeded' | 'retrying' | 'failed';

export interface MtaMetrics {
  /** One recipient's outcome of one delivery attempt; `source` is the local address it left from (or null). */
  attempt(outcome: AttemptOutcome, source: string | null): void;
  dkimFailure(): void;
  webhookAttempt(outcome: WebhookOutcome): void;
  /** Where the MX listener's open connection count is read from, once it listens. */
  mxConnections(count: () => number): void;
}

export function createMtaMetrics(registry: Registry, storage: Storage, clock: Clock): MtaMetrics {
  const registers = [registry];
  const attempts = new Counter({
    name: 'svc_delivery_attempts_total',
    help: 'Outcomes of delivery attempts, one per recipient of each SMTP transaction, by outcome and source address',
    labelNames: ['outcome', 'source'] as const,
    registers,
  });
  const dkim = new Counter({
    name: 'svc_dkim_signing_failures_total',
    help: 'Messages whose DKIM signing failed (the message waits; a key that does not open, a changed master key)',
    registers,
  });
  const webhooks = new Counter({
    name: 'svc_webhook_attempts_total',
    help: 'Webhook attempts made by this process, by outcome (retrying and failed are the failures)',
    labelNames: ['outcome'] as const,
    registers,
  });

  // One pass over the spool fills the three queue gauges: a scrape calls every collect in one turn of the
  // event loop (prom-client's Registry.metrics), so the first computes it and the pass is dropped after the turn.
  let pass: { at: number; depth: Map<string, number>; oldest: Map<string, number>; total: number } | null = null;
  const scan = () => {
    if (pass) return pass;
    const depth = new Map<string, number>();
    const oldest = new Map<string, number>();
    let total = 0;
    for (const e of storage.spool.entries()) {
      total++;
      // A message to several domains waits in each of their queues (docs/api.md §4.11).
      const domains = e.envelopes ? new Set(e.envelopes.map((v) => v.domain)) : [e.domain];
      for (const d of domains) {
        depth.set(d, (depth.get(d) ?? 0) + 1);
        oldest.set(d, Math.min(oldest.get(d) ?? Infinity, e.createdMs));
      }
    }
    pass = { at: clock.now(), depth, oldest, total };
    setImmediate(() => (pass = null));
    return pass;
  };
  new Gauge({
    name: 'svc_outbound_queue_messages',
    aggregator: SHARED,
    help: 'Messages in the outbound spool of this host',
    registers,
    collect() {
      this.set(scan().total);
    },
  });
  new Gauge({
    name: 'svc_outbound_queue_depth',
    aggregator: SHARED,
    help: 'Messages in the outbound spool by recipient domain (domains with none are absent)',
    labelNames: ['domain'] as const,
    registers,
    collect() {
      this.reset();
      for (const [domain, n] of scan().depth) this.set({ domain }, n);
    },
  });
  new Gauge({
    name: 'svc_outbound_queue_oldest_age_seconds',
    aggregator: SHARED,
    help: 'Age of the oldest spooled message by recipient domain, since it was accepted',
    labelNames: ['domain'] as const,
    registers,
    collect() {
      const { at, oldest } = scan();
      this.reset();
      for (const [domain, created] of oldest) this.set({ domain }, Math.max(0, (at - created) / 1000));
    },
  });
  const backlogGauge = (name: string, help: string, pick: (b: { pending: number; due: number }) => number) =>
    new Gauge({
      name,
      help,
      aggregator: SHARED,
      registers,
      async collect() {
        // A database that does not answer leaves the last value: /ready is what reports it.
        const b = await webhookBacklog(storage.db, new Date(clock.now())).catch(() => null);
        if (b) this.set(pick(b));
      },
    });
  backlogGauge(
    'svc_webhook_backlog',
    'Webhook attempts still to be made (all MTA nodes: the rows are shared)',
    (b) => b.pending,
  );
  backlogGauge(
    'svc_webhook_backlog_due',
    'Webhook attempts whose time has come and that no dispatcher has taken',
    (b) => b.due,
  );
  let mx: () => number = () => 0;
  new Gauge({
    name: 'svc_mx_connections',
    help: 'Open connections of the MX listener',
    registers,
    collect() {
      this.set(mx());
    },
  });

  return {
    attempt: (outcome, source) => attempts.inc({ outcome, source: source ?? 'default' }),
    dkimFailure: () => dkim.inc(),
    webhookAttempt: (outcome) => webhooks.inc({ outcome }),
    mxConnections: (count) => {
      mx = count;
    },
  };
}
