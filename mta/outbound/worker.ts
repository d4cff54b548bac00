// The delivery worker: takes due entries from the LMDB spool (leasing them first, so a crash means a
// retry, never a loss), signs each message, hands it to the destination's connection pool, and
// records what happened: the message row, an event, maybe a suppression; then removes or reschedules
// the spool entry. Postgres is written before the spool, so a crash in between re-finds the entry,
// sees its row already final and drops it (at-least-once, issue 5).
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import type { SpoolEntry, SpoolEnvelope } from '../../storage/lmdb/spool.js';
import {
  DELIVERABLE,
  failLostMessages,
  messageStatuses,
  type Outcome,
  type SpooledStatus,
} from '../../storage/pg/deliveries.js';
import { dkimSignatures, type Signatures } from '../../mail/dkim-sign.js';
import { markCrlfOnly } from '../../mail/smtp-data.js';
import { createKeyCache } from './signing-keys.js';
import { createOutcomeWriter, decide, type Decision } from './outcomes.js';
import { BODY_MISSING, createPools, type PoolOptions, type SendResult } from './pool.js';
import { createTlsPolicy } from './tls-policy.js';
import { simulate } from './simulate.js';
import { simulatorDomain } from '../../mail/simulator.js';
import { recordReport } from '../../storage/pg/reports.js';
import { sourceAddressFor } from './source-address.js';
import { pollLoop } from '../poll-loop.js';
import type { MtaMetrics } from '../metrics.js';

export interface WorkerOptions {
  /** Deliveries in progress at once, across destinations. */
  maxInFlight?: number;
  /** How long a leased entry stays away from the schedule before it is tried again. */
  leaseMs?: number;
  /** How often the spool is checked for due work when there is nothing to do. */
  pollMs?: number;
  /** How long SIGTERM waits for deliveries in progress. */
  drainMs?: number;
  /** A delivery in progress this long is logged once at warn, with what it is doing (default 60 s). */
  slowMs?: number;
  /**
   * The waits before each new look for the rows of freshly spooled messages that had none yet (a sendEmail whose
   * commit is in flight), holding their lease; default 10, 40 and 150 ms.
   */
  uncommittedWaitsMs?: number[];
  pool?: Partial<
    Pick<
      PoolOptions,
      | 'maxSessionsPerHost'
      | 'maxSessions'
      | 'failureTtlMs'
      | 'idleMs'
      | 'maxMessages'
      | 'connectTimeoutMs'
      | 'socketTimeoutMs'
    >
  >;
  /** The service's MTA metrics (bin/start.ts); none: nothing is counted. */
  metrics?: MtaMetrics;
  /** Told of each outbound TLS session, for TLS reports (mta/outbound/tls-report-record.ts). */
  onTlsSession?: PoolOptions['onTlsSession'];
}

/**
 * A spooled id without a row may be a sendEmail whose commit is still in flight, or one whose commit landed
 * though its answer was lost (core/send.ts keeps the body then). So the row decides, not the age (issue 15
 * item 5 b): looked for every 250 ms in the first 5 minutes, then every 10 minutes, and only after a day
 * without one (far past any commit) is the body dropped.
 */
const ORPHAN_FAST_MS = 5 * 60_000;
const ORPHAN_RECHECK_FAST_MS = 250;
const ORPHAN_RECHECK_SLOW_MS = 10 * 60_000;
const ORPHAN_KEEP_MS = 24 * 60 * 60_000;
/**
 * A sendEmail spools its body before its row commits (core/send.ts), and a busy MTA leases it in between: such a
 * row nearly always lands within milliseconds. A message spooled this recently that has no row yet is looked for
 * again a few times while its lease is held (uncommittedWaitsMs) before it is put back in the spool for the
 * 250 ms recheck, which costs a durable write, another lease, and a quarter of a second of its delivery.
 */
const UNCOMMITTED_MS = 5_000;
/** A message is lost once this long has passed after its retry schedule's end without a change. */
const LOST_MARGIN_MS = 24 * 60 * 60_000;
const RECONCILE_EVERY_MS = 60 * 60_000;

/** A delivery in progress: since when, what it is doing now, and whether it was reported slow. */
interface InFlight {
  since: number;
  stage: string;
  warned: boolean;
}

export function startDeliveryWorker(ctx: Context, storage: Storage, opts: WorkerOptions = {}) {
  const { config, clock, log } = ctx;
  const { spool, db } = storage;
  const maxInFlight = opts.maxInFlight ?? 256;
  const leaseMs = opts.leaseMs ?? 10 * 60_000;
  const pollMs = opts.pollMs ?? 100;
  const uncommittedWaitsMs = opts.uncommittedWaitsMs ?? [10, 40, 150];
  const metrics = opts.metrics;
  const pools = createPools({
    resolver: ctx.resolver,
    log,
    hostname: config.hostname,
    ehloNames: config.sourceAddresses.ehlo,
    port: config.outboundPort,
    allowPrivateMx: config.allowPrivateMx,
    clock,
    maxSessionsPerHost: config.maxSessionsPerHost,
    maxSessions: config.maxSessions,
    failureTtlMs: config.mxFailureTtlMs,
    tlsPolicy: createTlsPolicy({
      resolver: ctx.resolver,
      clock,
      extraCaCerts: config.extraCaCerts,
      mtaStsPort: config.mtaStsPort,
      allowPrivate: config.allowPrivateMx,
    }),
    onTlsSession: opts.onTlsSession,
    ...opts.pool,
  });
  const keys = createKeyCache(db, storage.sealer, () => clock.now());
  // A lost connection to Postgres is waited out for at most half the lease: after it, the messages would be sent
  // again anyway.
  // A batch that wrote webhook attempts wakes the dispatcher of this process (docs/decisions.md #88).
  const webhooksDue = storage.webhooksDue.wake;
  const writer = createOutcomeWriter(db, log, {
    retryForMs: Math.min(5 * 60_000, leaseMs / 2),
    onWebhooksDue: webhooksDue,
  });
  const simulator = simulatorDomain(config.hostname);
  const inFlight = new Map<string, InFlight>();
  const stage = (id: string, what: string) => {
    const f = inFlight.get(id);
    if (f) f.stage = what;
  };
  // Leased again while their attempt was finishing (rescheduled to a time already past): the lease
  // moved them away, so they are put back once that attempt is done.
  const relapsed = new Set<string>();
  const loop = pollLoop(
    async () => {
      try {
        const now = clock.now();
        const room = maxInFlight - inFlight.size;
        // A read first: leasing is a durable write, and an idle MTA should not fsync ten times a second.
        if (room > 0 && spool.due(now, 1).length) {
          const leased = await spool.lease(now, room, now + leaseMs);
          for (const e of leased) if (inFlight.has(e.id)) relapsed.add(e.id);
          const fresh = leased.filter((e) => !inFlight.has(e.id));
          if (fresh.length) void start(fresh);
        }
      } catch (err) {
        log.error({ err }, 'delivery poll failed');
      }
      return inFlight.size < maxInFlight && spool.due(clock.now(), 1).length > 0;
    },
    pollMs,
    clock,
  );

  // The control in this process says when it has accepted messages (docs/decisions.md #86).
  const stopWaking = spool.onWake(loop.wake);

  async function start(entries: SpoolEntry[]) {
    const since = clock.now();
    for (const e of entries) inFlight.set(e.id, { since, stage: 'reading its row', warned: false });
    let statuses: Map<string, SpooledStatus>;
    try {
      statuses = await statusesOf(entries);
    } catch (err) {
      // Leased, so they come back when the lease ends.
      log.error({ err }, 'reading message statuses failed');
      for (const e of entries) inFlight.delete(e.id);
      return;
    }
    const now = clock.now();
    const uncommitted = new Set(entries.filter((e) => !statuses.has(e.id) && now - e.createdMs < UNCOMMITTED_MS));
    for (const e of entries) if (!uncommitted.has(e)) run(e, statuses.get(e.id));
    if (uncommitted.size) void lookAgain([...uncommitted]);
  }

  /** Freshly spooled messages without a row yet (UNCOMMITTED_MS): looked for again before the orphan path. */
  async function lookAgain(entries: SpoolEntry[]) {
    let waiting = entries;
    for (const ms of uncommittedWaitsMs) {
      await new Promise((r) => setTimeout(r, ms));
      let found: Map<string, SpooledStatus>;
      try {
        found = await statusesOf(waiting);
      } catch {
        break;
      }
      for (const e of waiting) if (found.has(e.id)) run(e, found.get(e.id));
      waiting = waiting.filter((e) => !found.has(e.id));
      if (!waiting.length) return;
    }
    for (const e of waiting) run(e, undefined);
  }

  function statusesOf(entries: SpoolEntry[]) {
    return messageStatuses(
      db,
      entries.map((e) => e.id),
      entries.filter((e) => e.envelopes).map((e) => e.id),
    );
  }

  /** One leased entry's attempt, and what follows it whatever happened. */
  function run(e: SpoolEntry, st: SpooledStatus | undefined) {
    handle(e, st)
      .catch((err) => log.error({ err, messageId: e.id }, 'delivery failed unexpectedly; retried when its lease ends'))
      .finally(async () => {
        // Each put-back is a durable write, and a poll can lease the entry again while it is made (it is due
        // once committed, before the sync): then it is put back again, until a put-back is not overtaken. With
        // an `if` here that second lease would be left to run out (10 minutes) with no one working on it.
        while (relapsed.delete(e.id)) await spool.reschedule(e.id, clock.now()).catch(() => {});
        inFlight.delete(e.id);
        // A slot is free again: poll now, or right after a poll running now that found none free.
        if (inFlight.size === maxInFlight - 1) loop.wake();
      });
  }

  async function handle(e: SpoolEntry, st: SpooledStatus | undefined) {
    const now = clock.now();
    const status = st?.status;
    if (status === undefined) {
      const age = now - e.createdMs;
      if (age < ORPHAN_KEEP_MS)
        return spool.reschedule(e.id, now + (age < ORPHAN_FAST_MS ? ORPHAN_RECHECK_FAST_MS : ORPHAN_RECHECK_SLOW_MS));
      log.warn(
        { messageId: e.id },
        'spooled message has had no row for a day (its sendEmail never committed): dropped',
      );
      return spool.remove(e.id);
    }
    // Delivered, bounced, failed or suppressed meanwhile (or before a crash): nothing left to do.
    if (!DELIVERABLE.has(status)) return spool.remove(e.id);
    // A message to several: the envelopes with a recipient still to deliver (one suppressed, bounced by a
    // report or cancelled meanwhile is not sent again).
    const envelopes = e.envelopes && pendingEnvelopes(e.envelopes, st!);
    if (envelopes?.length === 0) return spool.remove(e.id);
    const end = (d: Decision) => (envelopes ? finishAll(e, envelopes, d) : finish(e, d, e.attempts));
    if (e.cancelledMs !== undefined)
      return end({ status: 'failed', detail: { reason: e.cancelReason ?? 'cancelled by operator' } });
    stage(e.id, 'signing');
    let signature: Signatures | undefined;
    try {
      const k = await keys.get(e.outboundId);
      if (!k)
        return end({
          status: 'failed',
          detail: { reason: 'the sending domain was removed; the message cannot be signed' },
        });
      // Signed once, whatever the number of envelopes: every copy is the same bytes (Bcc is in no header). The body is
      // lent, not copied: dkimSignatures is done with it before its first await.
      signature = await spool.withBody(e.id, (body) => dkimSignatures(body, k, now, e.crlfOnly === true));
    } catch (err) {
      // Fail closed (issue 5): never an unsigned send. A key that does not open (a changed master
      // key) is the operator's to fix, so the message waits instead of bouncing.
      log.error({ err, messageId: e.id }, 'DKIM signing failed; message deferred');
      metrics?.dkimFailure();
      return spool.reschedule(e.id, now + 60_000);
    }
    // No body to sign (lost to a damaged spool, or taken by an operator's hand): it cannot be sent.
    if (!signature) return end({ status: 'failed', detail: { reason: BODY_MISSING } });
    const { fields, crlfOnly } = signature;

    // Only the DKIM-Signature fields are kept: the message is put together from the spool when a session is ready
    // for it (docs/decisions.md #76), so that the many sends waiting for a session hold no copy of their bodies.
    // What the signer found of its line ends spares the DATA transparency a look for lone CRs and LFs.
    const signed = () => {
      const message = spool.bodyAfter(e.id, fields);
      return message && crlfOnly ? markCrlfOnly(message) : message;
    };
    const source = sourceAddressFor(config.sourceAddresses, e.mailFrom);
    if (envelopes) return sendEnvelopes(e, envelopes, source, signed);
    const attempts = e.attempts + 1;
    const sim = simulate(e.rcptTo, simulator);
    const progress = (what: string) => stage(e.id, what);
    const result =
      sim?.result ?? (await pools.send({ domain: e.domain, source }, e.mailFrom, e.rcptTo, signed, progress));
    const decision = decide(result, e.rcptTo, attempts, clock.now(), config.retryDelaysMs);
    if (sim) delete decision.suppress; // the simulator's bounces suppress no one (docs/api.md §4.11)
    attempted(e, e.domain, e.rcptTo, result, decision, attempts, source);
    await finish(e, decision, attempts);
    if (sim?.outcome === 'complained') await complain(e, e.rcptTo, false);
  }

  /** The simulator's complained@: delivered, then a complaint as a feedback loop would send it. */
  async function complain(e: SpoolEntry, rcpt: string, multi: boolean) {
    const recorded = await recordReport(db, {
      messageId: e.id,
      ...(multi ? { recipient: rcpt } : {}),
      projectId: e.projectId,
      type: 'complained',
      detail: { recipient: rcpt, source: 'simulator', feedbackType: 'abuse' },
      at: new Date(clock.now()),
    });
    if (recorded) webhooksDue();
  }

  /**
   * One info line per recipient of each attempt, as Postfix's `status=sent` lines (docs/operations.md, "Logs and
   * health"), and its count in svc_delivery_attempts_total.
   */
  function attempted(
    e: SpoolEntry,
    domain: string,
    recipient: string,
    result: SendResult,
    d: Decision,
    attempt: number,
    source: string | null,
  ) {
    metrics?.attempt(d.status, source);
    const t = result.transport;
    log.info(
      {
        messageId: e.id,
        domain,
        recipient,
        mx: result.host ?? t.host,
        ip: t.ip,
        tls: t.tls ? (t.tlsVersion ?? true) : false,
        reply: replyCode(result),
        ...(result.kind === 'reply' && result.reply.enhanced ? { dsn: result.reply.enhanced } : {}),
        ...(result.kind === 'connection' ? { error: result.error } : {}),
        outcome: d.status,
        delayMs: clock.now() - e.createdMs,
        attempt,
        source,
      },
      'delivery attempt',
    );
  }

  /** The outcome of an attempt for one recipient; every event names its recipient (docs/api.md §6). */
  const outcomeOf = (e: SpoolEntry, rcpt: string, d: Decision, attempts: number, multi: boolean): Outcome => ({
    messageId: e.id,
    ...(multi ? { recipient: rcpt } : {}),
    projectId: e.projectId,
    status: d.status,
    attempts,
    detail: { recipient: rcpt, ...d.detail },
    suppress: d.suppress,
    outboundId: e.outboundId,
    at: new Date(clock.now()),
  });

  async function finish(e: SpoolEntry, d: Decision, attempts: number) {
    stage(e.id, 'recording the outcome');
    await writer.write(outcomeOf(e, e.rcptTo, d, attempts, false));
    if (d.status === 'deferred') await spool.reschedule(e.id, d.retryAtMs!, attempts);
    else await spool.remove(e.id);
    log.debug({ messageId: e.id, status: d.status, attempts }, 'delivery outcome');
  }

  /** One decision for every recipient still pending of a message to several (a cancellation, say). */
  async function finishAll(e: SpoolEntry, envelopes: SpoolEnvelope[], d: Decision) {
    await Promise.all(envelopes.flatMap((v) => v.rcpts.map((r) => writer.write(outcomeOf(e, r, d, v.attempts, true)))));
    if (d.status === 'deferred') await spool.reschedule(e.id, d.retryAtMs!);
    else await spool.remove(e.id);
  }

  /**
   * A message to several recipients: one transaction per due envelope (recipient domain), in parallel; an
   * outcome per recipient (a recipient refused at RCPT TO gets its own reply); the recipients deferred stay
   * in their envelope with its next attempt time, and the entry is due again at the earliest envelope.
   */
  async function sendEnvelopes(
    e: SpoolEntry,
    envelopes: SpoolEnvelope[],
    source: string | null,
    signed: () => Buffer | undefined,
  ) {
    const now = clock.now();
    // Envelopes to a held domain (`svc queue hold`) are never sent: the lease flagged them (heldMs) and leased
    // the entry for the others (a held entry as a whole never reaches here; docs/operations.md, Queue).
    const free = envelopes.filter((v) => v.heldMs === undefined);
    // Due envelopes; none when an operator made the entry due early (`svc queue retry`): then all of them.
    const dueOnes = free.filter((v) => v.nextAttemptMs <= now);
    const due = new Set(dueOnes.length ? dueOnes : free);
    const next = await Promise.all(
      envelopes.map(async (v): Promise<SpoolEnvelope | null> => {
        if (!due.has(v)) return v;
        const attempts = v.attempts + 1;
        // The simulator's domain is answered here, recipient by recipient; nothing is dialled.
        const result =
          v.domain === simulator
            ? null
            : await pools.send({ domain: v.domain, source }, e.mailFrom, v.rcpts, signed, (what) =>
                stage(e.id, `${v.domain}: ${what}`),
              );
        const at = clock.now();
        const decisions = v.rcpts.map((r) => {
          const sim = result ? null : simulate(r, simulator);
          if (sim) {
            const d = decide(sim.result, r, attempts, at, config.retryDelaysMs);
            delete d.suppress;
            attempted(e, v.domain, r, sim.result, d, attempts, source);
            return { r, d, complained: sim.outcome === 'complained' };
          }
          const own = result!.kind === 'connection' ? undefined : result!.rejected?.find((x) => x.to === r);
          const res: SendResult = own
            ? { kind: 'reply', host: result!.host, reply: own.reply, transport: result!.transport }
            : result!;
          const d = decide(res, r, attempts, at, config.retryDelaysMs);
          attempted(e, v.domain, r, res, d, attempts, source);
          return { r, d, complained: false };
        });
        await Promise.all(decisions.map(({ r, d }) => writer.write(outcomeOf(e, r, d, attempts, true))));
        for (const { r } of decisions.filter((x) => x.complained)) await complain(e, r, true);
        const deferred = decisions.filter(({ d }) => d.status === 'deferred');
        if (!deferred.length) return null;
        const retryAt = Math.max(...deferred.map(({ d }) => d.retryAtMs!));
        return { domain: v.domain, rcpts: deferred.map(({ r }) => r), nextAttemptMs: retryAt, attempts };
      }),
    );
    const left = next.filter((v): v is SpoolEnvelope => v !== null);
    if (!left.length) await spool.remove(e.id);
    else
      await spool.reschedule(
        e.id,
        Math.min(...left.map((v) => v.nextAttemptMs)),
        Math.max(...left.map((v) => v.attempts)),
        left,
      );
    log.debug({ messageId: e.id, envelopes: due.size, left: left.length }, 'delivery outcomes');
  }

  // The reconciler (issue 15 item 5 d): rows left queued or deferred past the whole retry schedule and a day
  // more are held by no MTA (their spool entry or body was lost), so they end `failed`, each logged. Hourly,
  // and on each start; any node may run it, since the horizon is past every node's schedule.
  const lostAfterMs = config.retryDelaysMs.reduce((a, b) => a + b, 0) + LOST_MARGIN_MS;
  async function reconcile(): Promise<number> {
    let total = 0;
    for (;;) {
      const now = clock.now();
      const lost = await failLostMessages(db, {
        before: new Date(now - lostAfterMs),
        at: new Date(now),
        reason: 'lost: not delivered or retried within the whole retry schedule (its spooled copy is gone)',
        limit: 500,
      });
      for (const m of lost)
        log.warn(
          { messageId: m.id, projectId: m.projectId, was: m.status, lastChange: m.updatedAt },
          'lost message ended failed',
        );
      total += lost.length;
      if (lost.length) webhooksDue();
      if (lost.length < 500) return total;
    }
  }
  const reconciler = setInterval(
    () => void reconcile().catch((err) => log.error({ err }, 'reconciling lost messages failed')),
    RECONCILE_EVERY_MS,
  );
  reconciler.unref();
  void reconcile().catch((err) => log.error({ err }, 'reconciling lost messages failed'));

  // A delivery that takes this long is stuck or facing a very slow receiver (RFC 5321 §4.5.3.2 lets each reply
  // take minutes): said once, with what it is waiting for, so that an operator (or a benchmark) can tell which.
  const slowMs = opts.slowMs ?? 60_000;
  const watchdog = setInterval(
    () => {
      const now = clock.now();
      for (const [id, f] of inFlight)
        if (!f.warned && now - f.since >= slowMs) {
          f.warned = true;
          log.warn({ messageId: id, stage: f.stage, ms: now - f.since }, 'delivery still in progress');
        }
    },
    Math.max(1_000, slowMs / 4),
  );
  watchdog.unref();

  // Several MTA processes may share the spool (docs/decisions.md #58): leases of a process that is gone (it
  // died mid-delivery, or stopped with deliveries in progress) are retried now; a live sibling's are its own.
  // A process killed with -9 is respawned by the cluster primary, so its leases come back at that start, and
  // in any case each is due again at its lease's end.
  spool
    .recoverLeases(clock.now())
    .then((n) => n && log.warn({ recovered: n }, 'deliveries interrupted by a stopped MTA process are retried now'))
    .catch((err) => log.error({ err }, 'recovering spool leases failed'))
    .finally(() => loop.schedule(0));

  return {
    pools,
    /** When the last finished poll of the spool began (PollLoop.polledAt). */
    polledAt: loop.polledAt,
    /** Ends the lost messages now (what the hourly timer does); resolves with how many. */
    reconcile,
    /** SIGTERM: take no more work, let deliveries in progress finish (up to drainMs), then close. */
    async stop(): Promise<void> {
      stopWaking();
      loop.stop();
      clearInterval(reconciler);
      clearInterval(watchdog);
      const deadline = Date.now() + (opts.drainMs ?? 30_000);
      while ((inFlight.size || loop.polling()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      if (inFlight.size)
        log.warn(
          { inFlight: inFlight.size },
          'stopped with deliveries in progress; they are retried after their lease',
        );
      // The outcomes of the deliveries that finished; a Postgres that is down is not waited for past the drain.
      await writer.idle(Math.max(deadline, Date.now()) + 5_000);
      await pools.close();
    },
  };
}

export type DeliveryWorker = ReturnType<typeof startDeliveryWorker>;

/** The SMTP reply code of an attempt (RFC 5321 §4.2), null when no reply came (DNS, TCP, TLS failures). */
function replyCode(r: SendResult): number | null {
  if (r.kind === 'reply') return r.reply.code;
  if (r.kind === 'accepted') {
    const m = /^\d{3}/.exec(r.reply);
    return m ? Number(m[0]) : null;
  }
  return null;
}

/** The envelopes of a message to several with the recipients still deliverable (queued or deferred). */
function pendingEnvelopes(envelopes: SpoolEnvelope[], st: SpooledStatus): SpoolEnvelope[] {
  return envelopes
    .map((v) => ({ ...v, rcpts: v.rcpts.filter((r) => DELIVERABLE.has(st.recipients?.get(r) ?? st.status)) }))
    .filter((v) => v.rcpts.length > 0);
}
