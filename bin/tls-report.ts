// `svc tls-report [--day YYYY-MM-DD] [--json]`: the outbound TLS sessions of a UTC day (today by default) per
// recipient domain and policy, as the daily SMTP TLS report (RFC 8460) counts them, and what became of each
// domain's report (docs/operations.md, "TLS reporting"). Counts reach Postgres about once a minute.
//
// It reads Postgres, so it needs SVC_DATABASE_URL: the embedded database is the running service's alone.
// Exit codes as for every `svc` command (bin/svc.ts): 0 done, 1 failed, 2 bad usage or configuration.
import { parseArgs } from 'node:util';
import type { Config } from '../config/schema.js';
import type { CountRow, PolicyType } from '../mail/tls-report.js';
import { openPostgres, type Queryable } from '../storage/pg/client.js';
import { tlsCountsOfDay, tlsReportSendsOfDay, type ReportSendRow } from '../storage/pg/tls-reports.js';

export const TLS_REPORT_USAGE = `usage: svc tls-report [--day YYYY-MM-DD] [--json]
  the outbound TLS sessions of a UTC day (default today) per recipient domain and policy, successful and
  failed with their RFC 8460 result types, and the state of each domain's daily report`;

export interface TlsReportIo {
  out(line: string): void;
  err(line: string): void;
}

const processIo: TlsReportIo = { out: (l) => console.log(l), err: (l) => console.error(l) };

interface PolicySummary {
  type: PolicyType;
  strings: string[];
  mxHost: string[];
  successful: number;
  failed: number;
  failures: { result: string; receivingMx: string; receivingIp: string; sessions: number; detail: string }[];
}

export interface DomainSummary {
  domain: string;
  policies: PolicySummary[];
  report: Omit<ReportSendRow, 'domain'> | null;
}

/** The day's counts grouped per domain and policy, with each domain's report record. */
export async function summarize(q: Queryable, day: string): Promise<DomainSummary[]> {
  const [rows, sends] = await Promise.all([tlsCountsOfDay(q, day), tlsReportSendsOfDay(q, day)]);
  const out = new Map<string, DomainSummary>();
  const policies = new Map<string, PolicySummary>();
  for (const r of rows as (CountRow & { domain: string })[]) {
    let d = out.get(r.domain);
    if (!d) out.set(r.domain, (d = { domain: r.domain, policies: [], report: null }));
    const key = JSON.stringify([r.domain, r.policy.type, r.policy.strings, r.policy.mxHost]);
    let p = policies.get(key);
    if (!p) {
      policies.set(key, (p = { ...r.policy, successful: 0, failed: 0, failures: [] }));
      d.policies.push(p);
    }
    if (r.result === null) p.successful += r.sessions;
    else {
      p.failed += r.sessions;
      const { result, receivingMx, receivingIp, sessions, detail } = r;
      p.failures.push({ result, receivingMx, receivingIp, sessions, detail });
    }
  }
  for (const { domain, ...report } of sends) {
    let d = out.get(domain);
    if (!d) out.set(domain, (d = { domain, policies: [], report: null }));
    d.report = report;
  }
  return [...out.values()];
}

/** Control characters of a remote's policy text or an error never reach the terminal as such. */
const clean = (s: string) =>
  s.replace(/[\x00-\x1f\x7f-\x9f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);

export async function tlsReport(
  args: string[],
  config: Readonly<Config>,
  io: TlsReportIo = processIo,
  /** The database to read (tests); default SVC_DATABASE_URL. */
  db?: Queryable,
): Promise<number> {
  let values: { day?: string; json?: boolean; help?: boolean };
  try {
    ({ values } = parseArgs({
      args,
      options: { day: { type: 'string' }, json: { type: 'boolean' }, help: { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (e) {
    io.err(`svc tls-report: ${(e as Error).message.replace(/\s*\n\s*/g, ' ')}`);
    return 2;
  }
  if (values.help) {
    io.out(TLS_REPORT_USAGE);
    return 0;
  }
  const day = values.day ?? new Date().toISOString().slice(0, 10);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(day) || new Date(`${day}T00:00:00Z`).toISOString().slice(0, 10) !== day) {
    io.err(`svc tls-report: --day must be a date as YYYY-MM-DD, not ${JSON.stringify(day)}`);
    return 2;
  }
  let own: ReturnType<typeof openPostgres> | null = null;
  if (!db) {
    if (!config.databaseUrl) {
      io.err("svc tls-report: needs SVC_DATABASE_URL (the embedded database is the running service's alone)");
      return 1;
    }
    db = own = openPostgres(config.databaseUrl, 1);
  }
  try {
    const domains = await summarize(db, day);
    if (values.json) {
      io.out(JSON.stringify({ day, domains }));
      return 0;
    }
    if (!domains.length) {
      io.out(`no TLS sessions counted on ${day} (UTC)`);
      return 0;
    }
    io.out(`TLS sessions on ${day} (UTC), per recipient domain and policy`);
    for (const d of domains) {
      const rep = d.report;
      io.out('');
      io.out(
        `${clean(d.domain)}  report: ${
          rep ? `${rep.status}${rep.destinations.length ? ` to ${clean(rep.destinations.join(', '))}` : ''}` : 'not yet'
        }${rep?.lastError ? ` (${clean(rep.lastError)})` : ''}`,
      );
      for (const p of d.policies) {
        const mx = p.mxHost.length ? ` mx ${clean(p.mxHost.join(','))}` : '';
        io.out(`  ${p.type}${mx}: ${p.successful} successful, ${p.failed} failed`);
        for (const f of p.failures)
          io.out(
            `    ${f.result} ${clean(f.receivingMx || '-')} ${f.receivingIp || '-'}: ${f.sessions}${
              f.detail ? `  ${clean(f.detail)}` : ''
            }`,
          );
      }
    }
    return 0;
  } finally {
    await own?.close();
  }
}
