// Sends the daily SMTP TLS reports (RFC 8460; docs/operations.md, "TLS reporting"). About once a minute: the
// session counts are added to Postgres, and once a UTC day has ended (and a margin for every node's last
// flush), each domain with counts that day gets one report: `_smtp._tls.<domain>` TXT looked up through our
// resolver, the JSON report gzipped, to each rua: `mailto:` as a message in the notification outbox, which
// the notification sender delivers through our pools, DKIM-signed as SVC_NOTIFY_FROM's domain (§5.3);
// `https:` POSTed (§5.4). The tls_report_sends row makes it once per domain and day, whichever node runs it.
import { randomBytes, randomUUID } from 'node:crypto';
import https from 'node:https';
import net, { type LookupFunction } from 'node:net';
import type { SecureContext } from 'node:tls';
import { gzipSync } from 'node:zlib';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import { buildReport, parseTlsRptRecord, reportMessage } from '../../mail/tls-report.js';
import { enqueueNotification } from '../../storage/pg/notification-outbox.js';
import {
  claimTlsReport,
  dueTlsReports,
  endTlsReport,
  pruneTlsReports,
  tlsCountsOfDay,
  type DueReport,
} from '../../storage/pg/tls-reports.js';
import { addressOf } from './mta-sts-fetch.js';
import type { TlsSessionRecorder } from './tls-report-record.js';

const DAY_MS = 86_400_000;
/** After a day ends, how long before its report: every node has flushed its counts by then (one a minute). */
const AFTER_DAY_MS = 15 * 60_000;
/** Days back a report is still sent (an MTA that was down); counts older than KEEP_DAYS are forgotten. */
const LATE_DAYS = 3;
const KEEP_DAYS = 35;
const LEASE_MS = 10 * 60_000;
/** RFC 8460 §5.4: a failed https report may be retried; every hour, 4 attempts in all. */
const RETRY_MS = 60 * 60_000;
const MAX_ATTEMPTS = 4;
const HTTPS_TIMEOUT_MS = 30_000;
/** A compressed report larger than this is not sent (a day of sessions to one domain is far smaller). */
export const MAX_REPORT_BYTES = 1024 * 1024;
const USER_AGENT = 'svc-mail-tlsrpt/1';

export interface TlsReporterOptions {
  recorder: TlsSessionRecorder;
  secureContext: SecureContext;
  /** How often counts are flushed and due reports looked for. */
  everyMs?: number;
}

const dayOf = (ms: number) => new Date(ms).toISOString().slice(0, 10);

export function startTlsReporter(ctx: Context, storage: Storage, o: TlsReporterOptions) {
  const { config, clock, log, resolver } = ctx;
  const { db, sealer } = storage;
  const submitter = config.hostname;
  let running: Promise<number> | null = null;

  /** The lookup of the report's TXT: the URIs, none when the domain publishes no record. */
  async function ruaOf(domain: string): Promise<string[]> {
    try {
      return parseTlsRptRecord(await resolver.txt(`_smtp._tls.${domain}`));
    } catch (err) {
      if ((err as { absent?: boolean }).absent) return [];
      throw err;
    }
  }

  async function sendOne(r: DueReport): Promise<boolean> {
    const now = clock.now();
    const reportId = `${r.day}.${r.domain}@${submitter}`;
    const claimed = await claimTlsReport(db, { ...r, reportId }, new Date(now), new Date(now + LEASE_MS));
    if (!claimed) return false;
    const retry = async (error: string, destinations: string[] = []) => {
      log.warn({ domain: r.domain, day: r.day, error, attempt: claimed.attempts }, 'TLS report not sent');
      await endTlsReport(
        db,
        r,
        claimed.attempts >= MAX_ATTEMPTS
          ? { status: 'failed', destinations, error, at: new Date(clock.now()) }
          : { status: 'pending', destinations, error, nextAt: new Date(clock.now() + RETRY_MS) },
      );
      return false;
    };
    let rua: string[];
    try {
      rua = await ruaOf(r.domain);
    } catch (err) {
      return retry(`_smtp._tls.${r.domain} TXT lookup failed: ${(err as Error).message}`);
    }
    if (!rua.length) {
      await endTlsReport(db, r, { status: 'no-rua', destinations: [], at: new Date(clock.now()) });
      return false;
    }
    const rows = await tlsCountsOfDay(db, r.day, r.domain);
    const report = buildReport({
      organization: config.tlsReportOrg,
      contact: config.tlsReportContact,
      reportId: claimed.reportId,
      domain: r.domain,
      day: r.day,
      rows,
    });
    const gzipped = gzipSync(JSON.stringify(report));
    if (gzipped.length > MAX_REPORT_BYTES)
      return retry(`the report is ${gzipped.length} bytes compressed, over ${MAX_REPORT_BYTES}`);
    const done: string[] = [];
    const errors: string[] = [];
    for (const uri of rua.filter((u) => /^https:/i.test(u))) {
      try {
        await postReport(uri, gzipped);
        done.push(uri);
      } catch (err) {
        errors.push(`${uri}: ${(err as Error).message}`);
      }
    }
    const mailto = rua.filter((u) => /^mailto:/i.test(u));
    if (!done.length && !mailto.length) return retry(errors.join('; '));
    // The outbox rows and the record of the report commit together: a crash before sends it again, never twice.
    await db.tx(async (q) => {
      for (const uri of mailto) {
        const to = decodeURIComponent(uri.slice('mailto:'.length).split('?')[0]!);
        const id = randomUUID();
        const message = reportMessage({
          from: config.notifyFrom,
          to,
          submitter,
          domain: r.domain,
          day: r.day,
          reportId: claimed.reportId,
          gzipped,
          messageId: `${randomUUID()}@${submitter}`,
          date: new Date(clock.now()),
          boundary: `tlsrpt-${randomBytes(12).toString('hex')}`,
        });
        await enqueueNotification(q, {
          id,
          kind: 'tls-report',
          sender: config.notifyFrom,
          recipient: to,
          subject: `Report Domain: ${r.domain} Submitter: ${submitter} Report-ID: <${claimed.reportId}>`,
          bodySealed: sealer.seal(message, `notification_outbox:${id}`),
          now: new Date(clock.now()),
        });
        done.push(uri);
      }
      await endTlsReport(q, r, {
        status: 'sent',
        destinations: done,
        ...(errors.length ? { error: errors.join('; ') } : {}),
        at: new Date(clock.now()),
      });
    });
    log.info({ domain: r.domain, day: r.day, reportId: claimed.reportId, destinations: done }, 'TLS report sent');
    return true;
  }

  /**
   * POST the gzipped report (RFC 8460 §5.4): certificate verified against the system roots and
   * SVC_EXTRA_CA_CERTS, the host resolved through our resolver (a non-public address refused unless
   * SVC_ALLOW_PRIVATE_MX, as for MTA-STS fetches), a deadline, no redirects; any 2xx is success.
   */
  async function postReport(uri: string, body: Buffer): Promise<void> {
    const url = new URL(uri);
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const address = net.isIP(host) ? host : await addressOf(resolver, host, config.allowPrivateMx);
    const family = net.isIPv6(address) ? 6 : 4;
    const lookup: LookupFunction = (_h, options, callback) => {
      if ((options as { all?: boolean }).all)
        (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
          { address, family },
        ]);
      else callback(null, address, family);
    };
    await new Promise<void>((resolve, reject) => {
      const req = https.request(
        {
          host,
          port: url.port || 443,
          path: `${url.pathname}${url.search}`,
          method: 'POST',
          servername: net.isIP(host) ? undefined : host,
          secureContext: o.secureContext,
          rejectUnauthorized: true,
          lookup,
          agent: false,
          timeout: HTTPS_TIMEOUT_MS,
          headers: {
            'content-type': 'application/tlsrpt+gzip',
            'content-length': body.length,
            'user-agent': USER_AGENT,
          },
        } as https.RequestOptions,
        (res) => {
          res.resume();
          const ok = (res.statusCode ?? 0) >= 200 && (res.statusCode ?? 0) < 300;
          res.on('end', () => (ok ? resolve() : reject(new Error(`answered HTTP ${res.statusCode}`))));
          res.on('error', reject);
        },
      );
      const timer = setTimeout(
        () => req.destroy(new Error(`no answer within ${HTTPS_TIMEOUT_MS} ms`)),
        HTTPS_TIMEOUT_MS,
      );
      req.on('close', () => clearTimeout(timer));
      req.on('timeout', () => req.destroy(new Error(`no answer within ${HTTPS_TIMEOUT_MS} ms`)));
      req.on('error', reject);
      req.end(body);
    });
  }

  /** Flushes the counts, then sends the reports that are due; resolves with how many were sent. */
  async function round(): Promise<number> {
    await o.recorder.flush();
    if (!config.tlsReports) return 0;
    const now = clock.now();
    const lastEnded = dayOf(now - AFTER_DAY_MS - DAY_MS);
    await pruneTlsReports(db, dayOf(now - KEEP_DAYS * DAY_MS));
    let sent = 0;
    // Each claimed report leaves the due list; the bound only guards against a claim that keeps failing.
    for (let pass = 0; pass < 100; pass++) {
      const due = await dueTlsReports(db, dayOf(now - LATE_DAYS * DAY_MS), lastEnded, new Date(now), 50);
      for (const r of due) {
        try {
          if (await sendOne(r)) sent++;
        } catch (err) {
          log.error({ err, domain: r.domain, day: r.day }, 'TLS report failed; retried after its lease');
        }
      }
      if (due.length < 50) break;
    }
    return sent;
  }

  /** One round at a time: a caller during a round waits for it and then runs its own. */
  function run(): Promise<number> {
    const next: Promise<number> = (running ?? Promise.resolve(0)).catch(() => 0).then(round);
    running = next;
    void next
      .finally(() => {
        if (running === next) running = null;
      })
      .catch(() => {});
    return next;
  }

  const timer = setInterval(
    () => void run().catch((err) => log.error({ err }, 'TLS report round failed')),
    o.everyMs ?? 60_000,
  );
  timer.unref();

  return {
    run,
    /** Stop: the last counts are added (no report is started). */
    async stop() {
      clearInterval(timer);
      await running?.catch(() => {});
      await o.recorder.flush();
    },
  };
}

export type TlsReporter = ReturnType<typeof startTlsReporter>;
