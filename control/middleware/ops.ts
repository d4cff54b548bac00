// What operators use, beside the route table (docs/operations.md, "Metrics" and "Logs and health"): the access
// log line and HTTP metrics of every request, GET /metrics (Prometheus text) and GET /ready. Neither endpoint
// is signed, so neither is in the route table: /metrics answers only the networks of SVC_METRICS_CIDRS and is
// 404, like an unknown route, for everyone else; /ready says whether the database and the spool answer.
import type { Context as KoaContext, Next } from 'koa';
import type { Logger } from 'pino';
import { Counter, Histogram, type Registry } from 'prom-client';
import type { Deps } from '../deps.js';
import { fail } from '../errors.js';
import { networks } from '../../mail/client-address.js';
import { pingDatabase } from '../../storage/pg/metrics.js';

/**
 * svc_request_wait_seconds: how long requests wait for the shared writes they need (core/deps.ts, WaitStep). A slow
 * sendEmail says here whether it waited for Postgres (guard, accept) or for the spool's disk. Buckets from 0.5 ms:
 * on a quiet host each wait is one round trip or one sync, ~1 ms, and under load the batch ahead adds its own.
 */
export function requestWaits(registry: Registry): NonNullable<Deps['waited']> {
  const waits = new Histogram({
    name: 'svc_request_wait_seconds',
    help: 'Time a request waited for a shared write: the request guard, the spool, the accepting statement',
    labelNames: ['step'] as const,
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  // Bound once: an observation then costs no lookup of its labels.
  const steps = { guard: waits.labels('guard'), spool: waits.labels('spool'), accept: waits.labels('accept') };
  return (step, seconds) => steps[step].observe(seconds);
}

/**
 * Outermost but for the client address: times the request, counts it under its route name (never its path,
 * which holds ids: the label set stays bounded) and logs one line once the status is final.
 */
export function accessLog(log: Logger, registry: Registry | undefined) {
  const registers = registry ? [registry] : [];
  const requests = new Counter({
    name: 'svc_http_requests_total',
    help: 'HTTP requests answered, by route name (route table), method and status',
    labelNames: ['route', 'method', 'status'] as const,
    registers,
  });
  const duration = new Histogram({
    name: 'svc_http_request_duration_seconds',
    help: 'Time from the request to its answer, by route name',
    labelNames: ['route'] as const,
    registers,
  });
  return async (ctx: KoaContext, next: Next) => {
    const start = process.hrtime.bigint();
    try {
      await next();
    } finally {
      const seconds = Number(process.hrtime.bigint() - start) / 1e9;
      // Routes of the table and the endpoints below name themselves; the webmail's pages are the rest of 2xx/3xx.
      const route =
        (ctx.state.route as string | undefined) ??
        (ctx.status === 404 || ctx.status >= 500 ? 'unmatched' : 'webmail_page');
      if (registry) {
        requests.inc({ route, method: ctx.method, status: String(ctx.status) });
        duration.observe({ route }, seconds);
      }
      log.info(
        {
          requestId: ctx.state.requestId as string | undefined,
          method: ctx.method,
          route,
          status: ctx.status,
          durationMs: Math.round(seconds * 1e6) / 1e3,
          ip: ctx.ip,
        },
        'http request',
      );
    }
  };
}

/**
 * Where GET /metrics reads its text: the service's Registry, or, in a worker of `svc start` on several processes,
 * the sum of every worker's, which the cluster's primary gathers (bin/cluster.ts).
 */
export interface Scrape {
  readonly contentType: string;
  metrics(): Promise<string>;
}

/** GET /metrics and GET /ready; inside the error envelope, so a refusal is the envelope's 404. */
export function opsEndpoints(deps: Deps, registry: Scrape | undefined) {
  const { config, log } = deps.ctx;
  const scrapers = networks(config.metricsCidrs);
  const trusted = networks(config.trustedProxies);
  return async (ctx: KoaContext, next: Next) => {
    if (ctx.method !== 'GET' || (ctx.path !== '/metrics' && ctx.path !== '/ready')) return next();
    if (ctx.path === '/metrics') {
      // The client address is the one SVC_TRUSTED_PROXIES lets us believe. A forwarded request from a peer that
      // is not a trusted proxy came through a proxy we were not told about (Caddy on loopback, say), whose own
      // address would otherwise pass for the client's: refused, whoever the client is.
      const peer = ctx.req.socket.remoteAddress ?? '';
      const forwarded = ctx.get('x-forwarded-for') !== '' || ctx.get('forwarded') !== '';
      if (!registry || (forwarded && !trusted(peer)) || !scrapers(ctx.ip)) throw fail('not_found', 'No such route.');
      ctx.state.route = 'metrics';
      const text = await registry.metrics();
      ctx.set('Cache-Control', 'no-store');
      ctx.type = registry.contentType;
      ctx.body = text;
      return;
    }
    ctx.state.route = 'ready';
    // The reason is named, never the error itself (it may hold a host name or a path): that goes to the log.
    const problem = await ready(deps).catch((err: unknown) => {
      log.warn({ err }, 'not ready');
      return err instanceof NotReady ? err.message : 'not ready';
    });
    ctx.set('Cache-Control', 'no-store');
    ctx.status = problem === null ? 200 : 503;
    ctx.body = problem === null ? { ok: true } : { ok: false, error: problem };
  };
}

class NotReady extends Error {}

/**
 * How long /ready waits for the database: a load balancer's check times out after a few seconds, and a database
 * that takes longer than this to answer `SELECT 1` is not one to send traffic to.
 */
export const READY_DB_TIMEOUT_MS = 2000;

/** Resolves null when the database answers a query and the spool can be read; rejects with a NotReady. */
async function ready({ storage }: Deps): Promise<null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${READY_DB_TIMEOUT_MS} ms`)), READY_DB_TIMEOUT_MS);
  });
  await Promise.race([pingDatabase(storage.db), late])
    .catch((err: unknown) => {
      throw Object.assign(new NotReady('the database does not answer'), { cause: err });
    })
    .finally(() => clearTimeout(timer));
  try {
    storage.spool.count();
  } catch (err) {
    throw Object.assign(new NotReady('the spool cannot be read'), { cause: err });
  }
  return null;
}
