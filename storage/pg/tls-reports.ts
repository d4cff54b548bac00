// SMTP TLS Reporting (RFC 8460) counts and the record of reports sent (migration 0019; docs/operations.md,
// "TLS reporting"). The MTA adds counts in batches; the daily report reads them per domain and day.
import { createHash } from 'node:crypto';
import type { Db, Queryable } from './client.js';
import type { CountRow, PolicyType, ReportPolicy, ResultType } from '../../mail/tls-report.js';

export interface CountDelta {
  domain: string;
  /** YYYY-MM-DD (UTC). */
  day: string;
  policy: ReportPolicy;
  result: ResultType | null;
  receivingMx: string;
  receivingIp: string;
  detail: string;
  sessions: number;
}

const policyKey = (p: ReportPolicy) =>
  createHash('sha256')
    .update(JSON.stringify([p.type, p.strings, p.mxHost]))
    .digest('hex')
    .slice(0, 32);

/** Adds the counts, one upsert per row, in one transaction. */
export async function addTlsCounts(db: Db, rows: CountDelta[]): Promise<void> {
  if (!rows.length) return;
  await db.tx(async (q) => {
    for (const r of rows)
      await q.query(
        `INSERT INTO tls_report_counts (domain, day, policy_key, policy_type, policy_strings, mx_host, result,
           receiving_mx, receiving_ip, detail, sessions)
         VALUES ($1, $2, $3, $4, $5::jsonb, $6::jsonb, $7, $8, $9, $10, $11)
         ON CONFLICT (day, domain, policy_key, result, receiving_mx, receiving_ip)
         DO UPDATE SET sessions = tls_report_counts.sessions + EXCLUDED.sessions,
           detail = CASE WHEN EXCLUDED.detail <> '' THEN EXCLUDED.detail ELSE tls_report_counts.detail END`,
        [
          r.domain,
          r.day,
          policyKey(r.policy),
          r.policy.type,
          JSON.stringify(r.policy.strings),
          JSON.stringify(r.policy.mxHost),
          r.result ?? '',
          r.receivingMx,
          r.receivingIp,
          r.detail.slice(0, 500),
          r.sessions,
        ],
      );
  });
}

interface RawCount {
  domain: string;
  policyType: PolicyType;
  policyStrings: string[] | string;
  mxHost: string[] | string;
  result: string;
  receivingMx: string;
  receivingIp: string;
  detail: string;
  sessions: number;
}

// node-postgres parses jsonb, PGlite too; a string is parsed here in case a driver does not.
const json = <T>(v: T | string): T => (typeof v === 'string' ? (JSON.parse(v) as T) : v);

/** The counts of one UTC day, per domain (all domains when none is given), ordered for display. */
export async function tlsCountsOfDay(
  q: Queryable,
  day: string,
  domain?: string,
): Promise<(CountRow & { domain: string })[]> {
  const rows = await q.query<RawCount>(
    `SELECT domain, policy_type AS "policyType", policy_strings AS "policyStrings", mx_host AS "mxHost", result,
       receiving_mx AS "receivingMx", receiving_ip AS "receivingIp", detail, sessions
     FROM tls_report_counts WHERE day = $1 AND ($2::text IS NULL OR domain = $2)
     ORDER BY domain, policy_type, policy_key, result, receiving_mx, receiving_ip`,
    [day, domain ?? null],
  );
  return rows.map((r) => ({
    domain: r.domain,
    policy: { type: r.policyType, strings: json<string[]>(r.policyStrings), mxHost: json<string[]>(r.mxHost) },
    result: r.result === '' ? null : (r.result as ResultType),
    receivingMx: r.receivingMx,
    receivingIp: r.receivingIp,
    detail: r.detail,
    sessions: Number(r.sessions),
  }));
}

export interface DueReport {
  domain: string;
  day: string;
}

/**
 * The (domain, day) pairs with counts, from `fromDay` to `toDay` inclusive, whose report is neither done
 * nor claimed by another node (a pending one whose next attempt is due is listed again).
 */
export async function dueTlsReports(
  q: Queryable,
  fromDay: string,
  toDay: string,
  now: Date,
  limit: number,
): Promise<DueReport[]> {
  return q.query<DueReport>(
    `SELECT DISTINCT c.domain, to_char(c.day, 'YYYY-MM-DD') AS day
     FROM tls_report_counts c
     LEFT JOIN tls_report_sends s ON s.day = c.day AND s.domain = c.domain
     WHERE c.day BETWEEN $1 AND $2 AND (s.domain IS NULL OR (s.status = 'pending' AND s.next_attempt_at <= $3))
     ORDER BY day, c.domain LIMIT $4`,
    [fromDay, toDay, now, limit],
  );
}

/**
 * Takes the report of (domain, day) for this node until `leaseUntil`: a new pending row, or a pending one due
 * again. Null when another node has it or it is done. `attempts` counts this one.
 */
export async function claimTlsReport(
  q: Queryable,
  r: DueReport & { reportId: string },
  now: Date,
  leaseUntil: Date,
): Promise<{ attempts: number; reportId: string } | null> {
  const rows = await q.query<{ attempts: number; reportId: string }>(
    `INSERT INTO tls_report_sends (domain, day, report_id, status, attempts, next_attempt_at)
     VALUES ($1, $2, $3, 'pending', 1, $5)
     ON CONFLICT (day, domain) DO UPDATE SET attempts = tls_report_sends.attempts + 1, next_attempt_at = $5
       WHERE tls_report_sends.status = 'pending' AND tls_report_sends.next_attempt_at <= $4
     RETURNING attempts, report_id AS "reportId"`,
    [r.domain, r.day, r.reportId, now, leaseUntil],
  );
  return rows[0] ?? null;
}

export type ReportEnd =
  | { status: 'sent' | 'no-rua' | 'failed'; destinations: string[]; error?: string; at: Date }
  | { status: 'pending'; destinations: string[]; error: string; nextAt: Date };

export async function endTlsReport(q: Queryable, r: DueReport, end: ReportEnd): Promise<void> {
  await q.query(
    `UPDATE tls_report_sends SET status = $3::text, destinations = $4::jsonb, last_error = $5,
       sent_at = CASE WHEN $3::text = 'sent' THEN $6::timestamptz ELSE sent_at END,
       next_attempt_at = CASE WHEN $3::text = 'pending' THEN $7::timestamptz ELSE next_attempt_at END
     WHERE domain = $1 AND day = $2`,
    [
      r.domain,
      r.day,
      end.status,
      JSON.stringify(end.destinations),
      end.error?.slice(0, 1000) ?? null,
      end.status === 'pending' ? null : end.at,
      end.status === 'pending' ? end.nextAt : null,
    ],
  );
}

export interface ReportSendRow {
  domain: string;
  status: string;
  attempts: number;
  reportId: string;
  destinations: string[];
  lastError: string | null;
  sentAt: Date | null;
}

/** What became of the reports of a day. */
export async function tlsReportSendsOfDay(q: Queryable, day: string): Promise<ReportSendRow[]> {
  const rows = await q.query<ReportSendRow & { destinations: string[] | string }>(
    `SELECT domain, status, attempts, report_id AS "reportId", destinations, last_error AS "lastError",
       sent_at AS "sentAt"
     FROM tls_report_sends WHERE day = $1 ORDER BY domain`,
    [day],
  );
  return rows.map((r) => ({ ...r, destinations: json<string[]>(r.destinations) }));
}

/** Forgets counts and send records of days before `beforeDay`. */
export async function pruneTlsReports(q: Queryable, beforeDay: string): Promise<void> {
  await q.query('DELETE FROM tls_report_counts WHERE day < $1', [beforeDay]);
  await q.query('DELETE FROM tls_report_sends WHERE day < $1', [beforeDay]);
}
