// SMTP TLS Reporting (RFC 8460), the parts without I/O: the result types of a TLS session, the
// `_smtp._tls` TXT record, the aggregate JSON report (§4.4), its file name and the MIME message that
// carries it to a `mailto:` rua (§5.3). The MTA counts sessions (mta/outbound/tls-report-record.ts) and
// sends the reports (mta/outbound/tls-report-send.ts); docs/operations.md, "TLS reporting".

/** RFC 8460 §4.3: why a session failed (negotiation §4.3.1, DANE §4.3.2.1, MTA-STS §4.3.2.2). */
export type ResultType =
  | 'starttls-not-supported'
  | 'certificate-host-mismatch'
  | 'certificate-expired'
  | 'certificate-not-trusted'
  | 'validation-failure'
  | 'tlsa-invalid'
  | 'dnssec-invalid'
  | 'dane-required'
  | 'sts-policy-fetch-error'
  | 'sts-policy-invalid'
  | 'sts-webpki-invalid';

/** RFC 8460 §4.4 policy-type. */
export type PolicyType = 'sts' | 'tlsa' | 'no-policy-found';

/** The policy a session was under, as the report's `policy` object names it. */
export interface ReportPolicy {
  type: PolicyType;
  /** STS: the policy file's lines; TLSA: the records in presentation form; none: empty. */
  strings: string[];
  /** STS: the policy's mx patterns; TLSA: the MX host the records are for; none: empty. */
  mxHost: string[];
}

/** One TLS session (one connection, or one host refused before connecting), as the MTA saw it. */
export interface TlsSession {
  /** The policy domain: the recipient domain. */
  domain: string;
  policy: ReportPolicy;
  /** null: success. */
  result: ResultType | null;
  receivingMx?: string | null;
  receivingIp?: string | null;
  /** What went wrong in words (additional-information). */
  detail?: string | null;
}

/**
 * The result type of a certificate that node's TLS did not accept, from its error code (OpenSSL's
 * X509_V_ERR names, and node's own ERR_TLS_CERT_ALTNAME_INVALID), or null for a code that is not about
 * the certificate. The text form (`authorizationError`) carries the same code.
 */
export function certificateResult(code: string | null | undefined): ResultType | null {
  if (!code) return null;
  if (/ALTNAME|HOSTNAME|IP_ADDRESS_MISMATCH/.test(code)) return 'certificate-host-mismatch';
  if (/CERT_HAS_EXPIRED|CERT_NOT_YET_VALID|CRL_HAS_EXPIRED/.test(code)) return 'certificate-expired';
  if (/SELF_SIGNED|UNABLE_TO_GET_ISSUER|UNABLE_TO_VERIFY_LEAF|CERT_UNTRUSTED|CERT_REJECTED|INVALID_CA/.test(code))
    return 'certificate-not-trusted';
  if (/^(CERT_|X509_|UNABLE_TO_|ERR_TLS_CERT)/.test(code)) return 'validation-failure';
  return null;
}

/** A TLSA record in presentation form (RFC 6698 §2.2), as policy-string wants it (RFC 8460 §4.4). */
export const tlsaString = (r: { usage: number; selector: number; matchingType: number; data: Uint8Array }) =>
  `${r.usage} ${r.selector} ${r.matchingType} ${Buffer.from(r.data).toString('hex')}`;

/**
 * The report URIs of a domain's `_smtp._tls` TXT records (RFC 8460 §3): records not starting with
 * `v=TLSRPTv1` are ignored and anything but exactly one left means the domain wants no reports. Only the
 * `mailto:` and `https:` schemes are defined (§3); others are dropped.
 */
export function parseTlsRptRecord(txts: string[]): string[] {
  const ours = txts.filter((t) => /^v=TLSRPTv1\s*(;|$)/.test(t));
  if (ours.length !== 1) return [];
  for (const field of ours[0]!.split(';').slice(1)) {
    // Split at "=" and trim: the regex this was (`^\s*rua\s*=\s*(.*?)\s*$`) backtracked cubically on the
    // whitespace a domain's TXT record chooses (4 kB of it took 21 s: docs/decisions.md #66).
    const eq = field.indexOf('=');
    if (eq < 0 || field.slice(0, eq).trim() !== 'rua') continue;
    const value = field.slice(eq + 1).trim();
    if (/[\r\n\u2028\u2029]/.test(value)) continue;
    return value
      .split(',')
      .map((u) => u.trim())
      .filter((u) => /^mailto:[^@\s]+@[^@\s]+$/i.test(u) || /^https:\/\/[^\s]+$/i.test(u));
  }
  return [];
}

/** A row of counts: one policy, one result (null: success), one receiving host. */
export interface CountRow {
  policy: ReportPolicy;
  result: ResultType | null;
  receivingMx: string;
  receivingIp: string;
  detail: string;
  sessions: number;
}

export interface ReportInput {
  organization: string;
  contact: string;
  reportId: string;
  domain: string;
  /** YYYY-MM-DD, the UTC day reported. */
  day: string;
  rows: CountRow[];
}

/** The day's range: start of the UTC day, and its last second (as RFC 8460 Appendix B shows it). */
export function dayRange(day: string): { start: Date; end: Date } {
  const start = new Date(`${day}T00:00:00Z`);
  return { start, end: new Date(start.getTime() + 86_400_000 - 1000) };
}

const iso = (d: Date) => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** The aggregate report (RFC 8460 §4.4): one policy object per distinct policy, its counts and failures. */
export function buildReport(r: ReportInput): Record<string, unknown> {
  const byPolicy = new Map<string, { policy: ReportPolicy; ok: number; failed: number; failures: CountRow[] }>();
  for (const row of r.rows) {
    const key = JSON.stringify([row.policy.type, row.policy.strings, row.policy.mxHost]);
    let p = byPolicy.get(key);
    if (!p) byPolicy.set(key, (p = { policy: row.policy, ok: 0, failed: 0, failures: [] }));
    if (row.result === null) p.ok += row.sessions;
    else {
      p.failed += row.sessions;
      p.failures.push(row);
    }
  }
  const { start, end } = dayRange(r.day);
  return {
    'organization-name': r.organization,
    'date-range': { 'start-datetime': iso(start), 'end-datetime': iso(end) },
    'contact-info': r.contact,
    'report-id': r.reportId,
    policies: [...byPolicy.values()].map((p) => ({
      policy: {
        'policy-type': p.policy.type,
        ...(p.policy.strings.length ? { 'policy-string': p.policy.strings } : {}),
        'policy-domain': r.domain,
        ...(p.policy.mxHost.length ? { 'mx-host': p.policy.mxHost } : {}),
      },
      summary: { 'total-successful-session-count': p.ok, 'total-failure-session-count': p.failed },
      ...(p.failures.length
        ? {
            'failure-details': p.failures.map((f) => ({
              'result-type': f.result,
              ...(f.receivingMx ? { 'receiving-mx-hostname': f.receivingMx } : {}),
              ...(f.receivingIp ? { 'receiving-ip': f.receivingIp } : {}),
              'failed-session-count': f.sessions,
              ...(f.detail ? { 'additional-information': f.detail } : {}),
            })),
          }
        : {}),
    })),
  };
}

/**
 * RFC 8460 §5.3: `sender!policy-domain!begin-timestamp!end-timestamp.json.gz`, timestamps in seconds since
 * the epoch (the end one being the range's end, exclusive).
 */
export function reportFilename(submitter: string, domain: string, day: string): string {
  const { start } = dayRange(day);
  const s = start.getTime() / 1000;
  return `${submitter}!${domain}!${s}!${s + 86_400}.json.gz`;
}

export interface ReportMessageInput {
  from: string;
  to: string;
  submitter: string;
  domain: string;
  day: string;
  reportId: string;
  gzipped: Buffer;
  messageId: string;
  date: Date;
  boundary: string;
}

const base64Lines = (b: Buffer) => (b.toString('base64').match(/.{1,76}/g) ?? []).join('\r\n');

/**
 * The report as mail (RFC 8460 §5.3): a multipart/report (RFC 6522) with report-type "tlsrpt", a short
 * text part and the gzipped JSON as application/tlsrpt+gzip, and the TLS-Report-Domain and
 * TLS-Report-Submitter headers. ASCII only (every value here is a domain, an address or base64).
 */
export function reportMessage(m: ReportMessageInput): string {
  const name = reportFilename(m.submitter, m.domain, m.day);
  const headers = [
    `From: ${m.from}`,
    `To: ${m.to}`,
    `Subject: Report Domain: ${m.domain} Submitter: ${m.submitter} Report-ID: <${m.reportId}>`,
    `Date: ${m.date.toUTCString().replace('GMT', '+0000')}`,
    `Message-ID: <${m.messageId}>`,
    `TLS-Report-Domain: ${m.domain}`,
    `TLS-Report-Submitter: ${m.submitter}`,
    'MIME-Version: 1.0',
    `Content-Type: multipart/report; report-type="tlsrpt";\r\n boundary="${m.boundary}"`,
  ];
  const text =
    `This is an aggregate TLS report (RFC 8460) from ${m.submitter} for ${m.domain}, ` +
    `the UTC day ${m.day}.\r\nReport-ID: <${m.reportId}>\r\n`;
  const body = [
    `--${m.boundary}`,
    'Content-Type: text/plain; charset=us-ascii',
    'Content-Transfer-Encoding: 7bit',
    '',
    text,
    `--${m.boundary}`,
    `Content-Type: application/tlsrpt+gzip; name="${name}"`,
    'Content-Transfer-Encoding: base64',
    `Content-Disposition: attachment; filename="${name}"`,
    '',
    base64Lines(m.gzipped),
    `--${m.boundary}--`,
    '',
  ];
  for (const v of [m.from, m.to, m.domain, m.submitter, m.reportId, m.messageId])
    if (/[\r\n"\x00-\x1f\x7f-\uffff]/.test(v)) throw new Error('report message: a header value is not plain ASCII');
  return [...headers, '', ...body].join('\r\n');
}
