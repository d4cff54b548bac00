// `svc start` on several processes (SVC_WORKERS; docs/operations.md, "Workers"; docs/decisions.md #60). Node's
// cluster module: the primary forks the workers and owns every listening socket, handing each connection to a
// worker in turn (its round-robin policy, Linux's default), so one port serves from every core; each worker runs
// the roles asked for, as a single process would. What they share they already share safely between hosts:
// Postgres (rate limits, throttles, webhook and notification rows claimed with SKIP LOCKED), and the LMDB spool,
// where a lease is taken inside one write transaction and names the process that holds it.
//
// The primary does nothing else: it restarts a worker that died (whose leases the new one takes back), passes
// SIGTERM and SIGHUP on, and serves SVC_METRICS_PORT with the sum of every worker's metrics (prom-client's
// AggregatorRegistry; a worker's GET /metrics on the HTTP port asks the primary for the same sum).
import cluster, { type Worker } from 'node:cluster';
import os from 'node:os';
import { AggregatorRegistry, type Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Scrape } from '../control/middleware/ops.js';
import { markServiceProcess } from './exit-mode.js';
import { listenMetrics } from './metrics.js';
import { createLogger } from '../config/context.js';
import type { Role } from './start.js';

const ignore = () => {};

/** A worker that dies sooner than this after its start is restarted after a growing delay (a crash loop). */
const STABLE_MS = 10_000;
const RESTART_MIN_MS = 500;
const RESTART_MAX_MS = 30_000;
/** A worker's request for the cluster's metrics is given up after this (the primary's own limit is 5 s). */
const SCRAPE_TIMEOUT_MS = 6_000;

type ScrapeRequest = { type: 'svc:scrape'; id: number };
type ScrapeReply = { type: 'svc:scrape'; id: number; text?: string; error?: string };
type Ready = { type: 'svc:ready' };

/**
 * How many processes `svc start` runs: SVC_WORKERS, unset one per core this process may run on (its CPU affinity:
 * taskset, systemd's CPUAffinity=); one with the embedded database, which lives in one process.
 */
export function workerCount(config: Readonly<Config>): number {
  return config.databaseUrl ? (config.workers ?? os.availableParallelism()) : 1;
}

/**
 * One worker's share of the host-wide caps: SVC_MAX_SESSIONS and SVC_MAX_SESSIONS_PER_HOST (outbound sessions,
 * which the receiving hosts count per client address) and the listeners' connection caps, so that the host as a
 * whole keeps to what the operator set. Per-client caps (per IP, per IMAP address) stay per worker: connections
 * are handed round, so a client's are spread over the workers.
 */
export function perWorker(config: Readonly<Config>, workers: number): Config {
  const share = (n: number) => Math.max(1, Math.ceil(n / workers));
  return {
    ...config,
    maxSessions: share(config.maxSessions),
    maxSessionsPerHost: share(config.maxSessionsPerHost),
    mxMaxConnections: share(config.mxMaxConnections),
    httpMaxConnections: share(config.httpMaxConnections),
  };
}

/** This process's worker number (0-based) when it is a worker of `svc start`, else null. */
export function workerIndex(): number | null {
  if (!cluster.isWorker) return null;
  const n = Number(process.env.SVC_WORKER_INDEX);
  return Number.isInteger(n) ? n : null;
}

/**
 * In a worker, before anything opens: when the primary is gone (killed, crashed), end at once, as a crash does
 * (what this process had leased comes back to the next one). Node's own reaction, process.exit() from its
 * 'disconnect' listener, can hang for good: exit joins libuv's threads, and lmdb-js's write thread may be waiting
 * for the main thread to run a transaction's callbacks (seen: orphaned workers stuck there). Prepended, so that it
 * runs before Node's; SIGKILL runs no exit handler.
 */
export function endWithPrimary(): void {
  process.prependListener('disconnect', () => process.kill(process.pid, 'SIGKILL'));
}

/** In a worker, once its service runs: answers the primary's metric requests from `registry`, and says it is ready. */
export function joinCluster(registry: Registry): void {
  AggregatorRegistry.setRegistries([registry]);
  // The constructor is what installs prom-client's responder to the primary's requests (lib/cluster.js).
  new AggregatorRegistry();
  process.send?.({ type: 'svc:ready' } satisfies Ready);
}

/** GET /metrics in a worker: the primary gathers every worker's and adds them up. */
export function clusterScrape(): Scrape {
  let next = 0;
  const pending = new Map<number, { resolve(text: string): void; reject(err: Error): void }>();
  process.on('message', (msg: ScrapeReply) => {
    if (msg?.type !== 'svc:scrape') return;
    const p = pending.get(msg.id);
    pending.delete(msg.id);
    if (msg.error !== undefined || msg.text === undefined) p?.reject(new Error(msg.error ?? 'no metrics'));
    else p?.resolve(msg.text);
  });
  return {
    contentType: AggregatorRegistry.PROMETHEUS_CONTENT_TYPE,
    metrics() {
      const id = next++;
      return new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => {
          pending.delete(id);
          reject(new Error('the cluster primary did not answer a metrics request'));
        }, SCRAPE_TIMEOUT_MS);
        pending.set(id, {
          resolve: (text) => (clearTimeout(timer), resolve(text)),
          reject: (err) => (clearTimeout(timer), reject(err)),
        });
        process.send?.({ type: 'svc:scrape', id } satisfies ScrapeRequest);
      });
    },
  };
}

/**
 * The primary: forks `workers` processes running `svc start --role <role>` (the same command line), restarts
 * one that dies, and resolves with the exit code once SIGTERM or SIGINT has drained them all. Resolves 1 at
 * once when a worker fails before every worker has started (a port in use, a database that refuses): what a
 * single process would do.
 */
export async function runPrimary(config: Readonly<Config>, role: Role, workers: number, log: Logger): Promise<number> {
  const aggregate = new AggregatorRegistry();
  const slots = new Map<Worker, number>();
  const startedAt: number[] = [];
  const delays: number[] = [];
  let ready = 0;
  let stopping = false;
  let failedEarly = false;
  let done!: (code: number) => void;
  const finished = new Promise<number>((resolve) => (done = resolve));
  let worstExit = 0;

  const fork = (slot: number) => {
    startedAt[slot] = Date.now();
    const w = cluster.fork({ SVC_WORKER_INDEX: String(slot) });
    slots.set(w, slot);
    w.on('exit', (code, signal) => {
      slots.delete(w);
      if (stopping || failedEarly) {
        // A worker still starting when SIGTERM came has no handler yet and ends by the signal: nothing was lost.
        if (code !== 0 && signal !== 'SIGTERM') worstExit = 1;
        if (slots.size === 0) done(failedEarly ? 1 : worstExit);
        return;
      }
      if (ready < workers) {
        // Not yet all started: a worker that cannot start (bad port, database down) stops the lot.
        log.error({ worker: slot, code, signal }, 'a worker failed to start; stopping');
        failedEarly = true;
        for (const other of slots.keys()) other.process.kill('SIGTERM');
        if (slots.size === 0) done(1);
        return;
      }
      const quick = Date.now() - startedAt[slot]! < STABLE_MS;
      delays[slot] = quick ? Math.min(RESTART_MAX_MS, (delays[slot] ?? RESTART_MIN_MS / 2) * 2) : RESTART_MIN_MS;
      log.error(
        { worker: slot, pid: w.process.pid, code, signal, restartInMs: delays[slot] },
        'worker exited; starting another',
      );
      setTimeout(() => !stopping && fork(slot), delays[slot]).unref();
    });
  };

  cluster.on('message', (w: Worker, msg: ScrapeRequest | Ready) => {
    if (msg?.type === 'svc:ready') {
      if (++ready === workers) log.info({ role, workers }, 'all workers started');
    } else if (msg?.type === 'svc:scrape') {
      aggregate.clusterMetrics().then(
        (text) => w.isConnected() && w.send({ type: 'svc:scrape', id: msg.id, text } satisfies ScrapeReply),
        (err: Error) => w.isConnected() && w.send({ type: 'svc:scrape', id: msg.id, error: err.message }),
      );
    }
  });

  // SVC_METRICS_PORT is served here, with every worker's metrics added up (where the MTA runs, as in one process).
  let closeMetrics = async () => {};
  if (config.metricsPort !== null && (role === 'all' || role === 'mta')) {
    const listener = await listenMetrics(
      { contentType: aggregate.contentType, metrics: () => aggregate.clusterMetrics() },
      { host: config.bindHost, port: config.metricsPort, cidrs: config.metricsCidrs, log },
    );
    closeMetrics = listener.close;
    log.info({ metrics: listener.port, host: config.bindHost }, 'metrics listener accepting (every worker)');
  }

  for (let slot = 0; slot < workers; slot++) fork(slot);
  log.info({ role, workers, pid: process.pid }, 'starting workers');

  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, workers: slots.size }, 'draining workers');
    for (const w of slots.keys()) w.process.kill('SIGTERM');
    if (slots.size === 0) done(worstExit);
  };
  const hup = () => {
    for (const w of slots.keys()) w.process.kill('SIGHUP');
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
  process.on('SIGHUP', hup);
  const code = await finished;
  process.off('SIGTERM', stop);
  process.off('SIGINT', stop);
  process.off('SIGHUP', hup);
  await closeMetrics();
  log.info({ code }, 'stopped');
  return code;
}

/**
 * `svc start --role <role>`: the primary of SVC_WORKERS workers, one of those workers, or the one process (a
 * single worker, or the embedded database). Resolves with the exit code once drained after SIGTERM or SIGINT.
 */
export async function startCommand(config: Readonly<Config>, role: Role): Promise<number> {
  markServiceProcess();
  const workers = workerCount(config);
  const log = createLogger(config.logLevel);
  const index = workerIndex();
  // The primary loads none of the roles' code.
  if (workers > 1 && index === null) return runPrimary(config, role, workers, log);
  if (index !== null) endWithPrimary();
  const { startService } = await import('./start.js');
  if (index === null && config.workers !== null && config.workers > 1 && !config.databaseUrl)
    log.info(
      { workers: config.workers },
      'one process: the embedded database lives in one (SVC_WORKERS needs SVC_DATABASE_URL)',
    );
  const svc =
    index === null
      ? await startService(config, { role, log })
      : await startService(perWorker(config, workers), {
          role,
          log: log.child({ worker: index }),
          metricsListener: false,
          scrape: clusterScrape(),
        });
  if (index !== null) joinCluster(svc.metrics);
  await new Promise<void>((resolve) => {
    // A worker hears a signal twice (the terminal's SIGINT reaches the whole process group, and the primary
    // passes SIGTERM on): the first drains, later ones must not kill it mid-drain.
    const onSignal = (sig: string) => {
      process.off('SIGTERM', onSignal);
      process.off('SIGINT', onSignal);
      if (index !== null) process.on('SIGTERM', ignore).on('SIGINT', ignore);
      svc.ctx.log.info({ signal: sig }, 'draining');
      resolve();
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  await svc.stop();
  svc.ctx.log.info('stopped');
  return 0;
}
