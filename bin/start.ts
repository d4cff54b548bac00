// Assembles the service: context, storage, and the listeners of the roles asked for. Tests call
// startService() directly (port 0, their own clock); `svc start` calls it from the command line.
import type { Logger } from 'pino';
import { Gauge, Registry } from 'prom-client';
import type { Config } from '../config/schema.js';
import { createLogger, systemClock, type Clock, type Context } from '../config/context.js';
import { loadTls, type Certificate, type TlsCertificates } from '../config/tls.js';
import { checkSourceAddressesOnHost } from '../config/host-addresses.js';
import { openStorage, type Storage } from '../storage/index.js';
import { sweepExpired } from '../storage/pg/request-guard.js';
import { createApp } from '../control/app.js';
import { listenHttp } from '../control/server.js';
import { sweepWebmailSessions } from '../storage/pg/webmail.js';
import type { Deps } from '../control/deps.js';
import { LOG_N } from '../core/passwords.js';
import { createResolver } from '../mail/dns.js';
import { DnsError } from '../mail/resolver.js';
import { publishedKey } from '../mail/dkim-keys.js';
import type { PlatformKey } from '../storage/platform-dkim.js';
import { startDeliveryWorker, type DeliveryWorker, type WorkerOptions } from '../mta/outbound/worker.js';
import { startNotificationSender } from '../mta/outbound/notifications.js';
import { createTlsSessionRecorder } from '../mta/outbound/tls-report-record.js';
import { startTlsReporter, type TlsReporter } from '../mta/outbound/tls-report-send.js';
import { trustContext } from '../mta/outbound/tls-policy.js';
import { listenMx } from '../mta/inbound/listener.js';
import { listenImap, type ImapServerOptions } from '../imap/server.js';
import { finishInterruptedPurges } from '../core/inboxes.js';
import { createStoreBackend } from '../imap/store-backend.js';
import {
  startWebhookDispatcher,
  type WebhookDispatcher,
  type WebhookDispatcherOptions,
} from '../mta/webhooks/dispatcher.js';
import { createMtaMetrics } from '../mta/metrics.js';
import { listenMetrics } from './metrics.js';
import { requestWaits, type Scrape } from '../control/middleware/ops.js';

export type Role = 'all' | 'control' | 'mta' | 'imap';

export interface StartOptions {
  role?: Role;
  clock?: Clock;
  log?: Logger;
  checkResponses?: boolean;
  /**
   * Whether the MTA runs in this process (default: for the roles `all` and `mta`). Tests of the
   * control plane alone turn it off so that accepted messages stay `queued` while they look.
   */
  mta?: boolean | WorkerOptions;
  /** scrypt cost (log2 N) of new password hashes; default LOG_N (15). Tests lower it: hashing is CPU-bound. */
  passwordLogN?: number;
  /** Options of the webhook dispatcher, which runs wherever the MTA does. */
  webhooks?: WebhookDispatcherOptions;
  /**
   * Whether this process serves SVC_METRICS_PORT (default: when it runs the MTA). A worker of `svc start` on
   * several processes does not: the cluster's primary serves the sum of every worker's (bin/cluster.ts).
   */
  metricsListener?: boolean;
  /** What GET /metrics on the HTTP listener serves instead of this service's own Registry (bin/cluster.ts). */
  scrape?: Scrape;
  /** Limits and timers of the IMAP server (connection caps, the login failure delay); its port is config's. */
  imap?: Partial<Omit<ImapServerOptions, 'host' | 'port'>>;
}

export interface RunningService {
  ctx: Context;
  storage: Storage;
  /** Bound ports of the listeners this process runs. */
  ports: { http?: number; smtp?: number; imap?: number; imaps?: number; metrics?: number };
  /**
   * This service's Prometheus metrics, every role of the process on one Registry of its own (so that two
   * services in one process never share a counter): GET /metrics on the HTTP and the metrics listener.
   */
  metrics: Registry;
  /** The MTA's pollers, when this process runs the MTA (tests wait on their polledAt()). */
  mta?: { worker: DeliveryWorker; webhooks: WebhookDispatcher; tlsReports: TlsReporter };
  /** The certificate of SVC_TLS_CERT/SVC_TLS_KEY, when configured and this process runs a TLS listener. */
  tls: TlsCertificates | null;
  /**
   * Rereads the certificate files (what SIGHUP does): resolves with the new certificate, null when none is
   * configured; a failure is logged and the certificate in use is kept.
   */
  reloadTls(): Promise<Certificate | null>;
  publicUrl: string;
  stop(): Promise<void>;
}

const SWEEP_EVERY_MS = 60_000;
/** How long the start-up look-up of the platform DKIM record may take before it is given up (silently). */
const DKIM_CHECK_MS = 15_000;

/**
 * docs/operations.md, "Platform mail": one warning when links in platform mail would be http (SVC_PUBLIC_URL unset
 * or not https), and one when the notify domain's DKIM record is not found. The look-up runs beside the start,
 * never holding it up, and is given up after DKIM_CHECK_MS; a look-up that got no answer warns of nothing.
 */
function warnAboutPlatformMail(ctx: Context, keys: () => Promise<PlatformKey[]>): void {
  const { config, log, resolver } = ctx;
  if (!config.publicUrl?.startsWith('https://'))
    log.warn(
      { publicUrl: config.publicUrl },
      'SVC_PUBLIC_URL is unset or not https: links in platform mail (password resets, invitations) are http',
    );
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), DKIM_CHECK_MS);
    timer.unref();
  });
  const check = async () => {
    const [rsa] = await keys();
    if (!rsa) return null;
    const found = await resolver.txt(rsa.host, { fresh: true }).catch((err: unknown) => {
      if (err instanceof DnsError && err.absent) return [];
      throw err;
    });
    return found.some((v) => publishedKey(v) === rsa.publicKey) ? null : rsa;
  };
  void Promise.race([check(), deadline])
    .then((missing) => {
      if (missing)
        log.warn(
          { host: missing.host, value: missing.txt },
          `platform DKIM record of ${missing.domain} not found: publish it (svc doctor --platform lists every ` +
            'record platform mail needs)',
        );
    })
    .catch(() => {})
    .finally(() => clearTimeout(timer));
}
const IDLE_BUCKET_MS = 60 * 60_000;

export async function startService(config: Readonly<Config>, opts: StartOptions = {}): Promise<RunningService> {
  const role = opts.role ?? 'all';
  if (role !== 'all' && !config.databaseUrl) {
    throw new Error(`--role ${role} needs SVC_DATABASE_URL: the embedded database lives inside one process`);
  }
  const clock = opts.clock ?? systemClock;
  const ctx: Context = {
    config,
    clock,
    log: opts.log ?? createLogger(config.logLevel),
    resolver: createResolver({ servers: config.dnsServers, clock }),
  };
  const mta = opts.mta ?? (role === 'all' || role === 'mta');
  // Before anything opens: a source address the host does not have stops the MTA's start with one line
  // (ConfigError), as does a certificate that cannot be used.
  if (mta) checkSourceAddressesOnHost(config.sourceAddresses);
  const tls = role === 'control' ? null : await loadTls(config);
  if (tls) {
    const c = tls.current();
    ctx.log.info(
      { subject: c.subject, fingerprint256: c.fingerprint256, validTo: c.validTo },
      'TLS certificate loaded',
    );
  }
  const storage = await openStorage(config, ctx.log);
  const stops: (() => Promise<void>)[] = [];
  const ports: RunningService['ports'] = {};
  let pollers: RunningService['mta'];
  let publicUrl = config.publicUrl ?? '';
  const metrics = new Registry();

  try {
    if (mta) {
      const mtaMetrics = createMtaMetrics(metrics, storage, clock);
      // SMTP TLS reports (RFC 8460; docs/operations.md, "TLS reporting"): sessions counted in memory, flushed
      // and reported by the reporter.
      const tlsSessions = createTlsSessionRecorder(storage.db, clock, ctx.log);
      const worker = startDeliveryWorker(ctx, storage, {
        ...(typeof mta === 'object' ? mta : {}),
        metrics: mtaMetrics,
        ...(config.tlsReports ? { onTlsSession: tlsSessions.record } : {}),
      });
      const notifications = startNotificationSender(ctx, storage, worker.pools);
      warnAboutPlatformMail(ctx, notifications.keys);
      const webhooks = startWebhookDispatcher(ctx, storage, { ...opts.webhooks, metrics: mtaMetrics });
      const tlsReports = startTlsReporter(ctx, storage, {
        recorder: tlsSessions,
        secureContext: trustContext(config.extraCaCerts),
      });
      pollers = { worker, webhooks, tlsReports };
      // Pushed first so that it stops last (stops run in reverse): no new sends, then the drain, then the last
      // TLS session counts.
      stops.push(async () => {
        await notifications.stop();
        await Promise.all([worker.stop(), webhooks.stop()]);
        await tlsReports.stop();
      });
      ctx.log.info({ role, outboundPort: config.outboundPort, hostname: config.hostname }, 'MTA delivering');
      // The MX listener (DSN and ARF reports at the VERP return paths). Pushed after the worker, so it
      // stops first: no report is taken while the drain runs.
      const mx = await listenMx(ctx, storage, { tls });
      ports.smtp = mx.port;
      mtaMetrics.mxConnections(mx.connections);
      stops.push(mx.close);
      ctx.log.info({ role, smtp: mx.port, host: config.bindHost }, 'MX listener accepting');
      if (config.metricsPort !== null && opts.metricsListener !== false) {
        const listener = await listenMetrics(metrics, {
          host: config.bindHost,
          port: config.metricsPort,
          cidrs: config.metricsCidrs,
          log: ctx.log,
        });
        ports.metrics = listener.port;
        stops.push(listener.close);
        ctx.log.info({ role, metrics: listener.port, host: config.bindHost }, 'metrics listener accepting');
      }
    }

    if (role === 'all' || role === 'imap') {
      const backend = createStoreBackend({ ctx, storage }, { passwordLogN: opts.passwordLogN });
      const imap = await listenImap(ctx.log, backend, {
        ...opts.imap,
        host: config.bindHost,
        port: config.imapPort,
        tls,
        implicitTlsPort: config.imapsPort,
      });
      ports.imap = imap.port;
      new Gauge({
        name: 'svc_imap_connections',
        help: 'Open connections of the IMAP listeners',
        registers: [metrics],
        collect() {
          this.set(imap.connections());
        },
      });
      if (imap.tlsPort !== null) ports.imaps = imap.tlsPort;
      // Pushed before the control plane, so it stops after it; SIGTERM says BYE to every session.
      stops.push(imap.close);
      ctx.log.info(
        { role, imap: imap.port, imaps: imap.tlsPort, starttls: tls !== null, host: config.bindHost },
        'IMAP server listening',
      );
    }

    if (role === 'all' || role === 'control') {
      const deps: Deps = {
        ctx,
        storage,
        publicUrl: () => publicUrl,
        passwordLogN: opts.passwordLogN ?? LOG_N,
        waited: requestWaits(metrics),
      };
      const http = await listenHttp(
        createApp(deps, { checkResponses: opts.checkResponses, metrics, scrape: opts.scrape }),
        config.bindHost,
        config.httpPort,
        { maxConnections: config.httpMaxConnections },
      );
      ports.http = http.port;
      const host = config.bindHost.includes(':') ? `[${config.bindHost}]` : config.bindHost;
      publicUrl ||= `http://${host}:${http.port}`;
      stops.push(http.close);

      const sweep = setInterval(() => {
        sweepExpired(storage.db, new Date(ctx.clock.now()), IDLE_BUCKET_MS).catch((err) =>
          ctx.log.warn({ err }, 'sweep failed'),
        );
        // docs/decisions.md #50: a deleted inbox's mail whose purge a crash cut short.
        finishInterruptedPurges({ ctx, storage })
          .then((n) => n && ctx.log.info({ inboxes: n }, 'finished interrupted inbox purges'))
          .catch((err) => ctx.log.warn({ err }, 'inbox purge sweep failed'));
        sweepWebmailSessions(storage.db, new Date(ctx.clock.now())).catch((err) =>
          ctx.log.warn({ err }, 'webmail session sweep failed'),
        );
      }, SWEEP_EVERY_MS);
      sweep.unref();
      stops.push(async () => clearInterval(sweep));
      ctx.log.info({ role, http: http.port, host: config.bindHost, publicUrl }, 'control plane listening');
    }
  } catch (err) {
    for (const stop of stops.reverse()) await stop().catch(() => {});
    await storage.close();
    throw err;
  }

  const reloadTls = async (): Promise<Certificate | null> => {
    if (!tls) {
      ctx.log.info('SIGHUP: no TLS certificate configured, nothing to reload');
      return null;
    }
    try {
      const c = await tls.reload();
      ctx.log.info(
        { subject: c.subject, fingerprint256: c.fingerprint256, validTo: c.validTo },
        'TLS certificate reloaded',
      );
      return c;
    } catch (err) {
      ctx.log.error({ err }, 'TLS certificate reload failed; the certificate in use is kept');
      return null;
    }
  };
  // SIGHUP rereads the certificate (a renewal, as with Postfix and Dovecot `reload`). Without a handler
  // Node would exit on SIGHUP; with one, the process stays up whatever the reload gives.
  const onHup = () => void reloadTls();
  process.on('SIGHUP', onHup);
  stops.push(async () => {
    process.off('SIGHUP', onHup);
  });

  let stopping: Promise<void> | null = null;
  return {
    ctx,
    storage,
    ports,
    metrics,
    mta: pollers,
    tls,
    reloadTls,
    get publicUrl() {
      return publicUrl;
    },
    stop() {
      // Listeners stop accepting and finish what is in flight, then storage closes.
      stopping ??= (async () => {
        for (const stop of stops.reverse()) await stop();
        await storage.close();
      })();
      return stopping;
    },
  };
}
