// Authentication of received mail and the header fields we put in front of it (docs/api.md §6 item 5).
//
// mailauth 7.1.0's authenticate() verifies DKIM (RFC 6376), SPF (RFC 7208), ARC (RFC 8617) and DMARC
// (RFC 7489) in one pass over the message as a stream (the body is hashed as it goes by; only the header
// is held) and formats the RFC 8601 Authentication-Results and the RFC 7208 §9.1 Received-SPF fields.
// Every lookup goes through our resolver (SVC_DNS_SERVERS), adapted here to mailauth's `(name, type)`
// contract of node:dns `resolve`. BIMI is off: nothing of ours shows sender logos, and it would cost
// lookups on every message.
//
// RFC 8601 §5: Authentication-Results fields arriving from outside that claim our authserv-id are
// removed before delivery, or a forger could write "dkim=pass" in our name. The stored body is the
// received message minus those fields: rewritten once here, before it is stored, and never after (the
// "never rewritten" of mail/mail-store.ts is about the stored body). The alternative, keeping them and
// recording offsets to hide, would make every reader (IMAP BODY[], webmail, export) splice them out.
import { createRequire } from 'node:module';
import type { Readable } from 'node:stream';
import { fieldSpans } from '../../mail/mime-header.js';
import { DnsError, type DnsFailure, type Resolver } from '../../mail/resolver.js';

const require = createRequire(import.meta.url);

type MailauthResolver = (name: string, type: string) => Promise<unknown>;

interface AuthenticateResult {
  dmarc: false | { status?: { result?: string }; policy?: string };
  spf: false | { header?: string };
  /** "Received-SPF: ...\r\nAuthentication-Results: ...\r\n" (plus ARC seals when sealing, which we do not). */
  headers: string;
}

interface Mailauth {
  authenticate(
    input: Readable | Buffer,
    opts: {
      ip: string;
      helo: string;
      sender: string;
      mta: string;
      resolver: MailauthResolver;
      disableBimi: boolean;
    },
  ): Promise<AuthenticateResult>;
}

// Required at the first received message, not at start: mailauth's index loads its ARC, BIMI and VMC code with
// some 250 modules (X.509 and ASN.1 among them), ~0.2 s of every start of a process that runs the MX listener. The
// first message pays it once instead, and a process that only sends (or a test that receives nothing) never does.
let mailauth: Mailauth | null = null;
const loadMailauth = () => (mailauth ??= require('mailauth') as Mailauth);

// node:dns error codes, which mailauth tests for: ENOTFOUND and ENODATA are "no record" (a void lookup,
// RFC 7208 §4.6.4), anything else is a temporary failure (temperror).
const DNS_CODE: Record<DnsFailure, string> = {
  NXDOMAIN: 'ENOTFOUND',
  NODATA: 'ENODATA',
  TIMEOUT: 'ETIMEOUT',
  SERVFAIL: 'ESERVFAIL',
};

function dnsError(code: string, name: string, type: string): Error {
  return Object.assign(new Error(`${type} ${name}: ${code}`), { code });
}

/** The longest TXT record mailauth is shown: an RSA-8192 DKIM key is some 1.4 kB. */
export const MAX_TXT_OCTETS = 4096;

/**
 * Our resolver as mailauth calls it: `resolver(name, type)` resolving like node:dns `resolve` (TXT as
 * arrays of strings; MX as { exchange, priority }). PTR is not in our resolver's contract, so it fails
 * as a temporary error: only SPF's "ptr" mechanism asks for it, which RFC 7208 §5.5 says not to use.
 */
export function mailauthResolver(r: Resolver): MailauthResolver {
  return async (name, type) => {
    try {
      switch (type.toUpperCase()) {
        case 'TXT': {
          // Our resolver joins each record's strings (RFC 7208 §3.3); one string per record is the same value.
          // A record over MAX_TXT_OCTETS is left out: mailauth's parsers backtrack quadratically over what the
          // domain wrote (mail/auth-header-budget.ts), and no DKIM key, SPF or DMARC record is near that long.
          const records = (await r.txt(name)).filter((s) => s.length <= MAX_TXT_OCTETS);
          if (records.length === 0) throw dnsError('ENODATA', name, type);
          return records.map((s) => [s]);
        }
        case 'MX':
          return await r.mx(name);
        case 'A':
          return await r.a(name);
        case 'AAAA':
          return await r.aaaa(name);
        case 'CNAME': {
          const target = await r.cname(name);
          if (!target) throw dnsError('ENODATA', name, type);
          return [target];
        }
        default:
          throw dnsError('ENOTIMP', name, type);
      }
    } catch (err) {
      if (err instanceof DnsError) throw dnsError(DNS_CODE[err.failure], name, type);
      throw err;
    }
  };
}

export interface Verdict {
  /** The Authentication-Results field (RFC 8601 §2.2) with our authserv-id, CRLF-terminated. */
  authenticationResults: string;
  /** The Received-SPF field (RFC 7208 §9.1), CRLF-terminated, or '' when there is none. */
  receivedSpf: string;
  /** DMARC failed under a p=reject policy (RFC 7489 §6.3): filed in Junk rather than refused. */
  junk: boolean;
}

export interface AuthenticateInput {
  /** The client's IP address. */
  ip: string;
  /** The EHLO/HELO argument. */
  helo: string;
  /** The MAIL FROM address; '' for the null sender (SPF then checks postmaster@<helo>, RFC 7208 §2.4). */
  sender: string;
  /** Our authserv-id: SVC_HOSTNAME. */
  authservId: string;
  resolver: MailauthResolver;
}

const crlfEnded = (s: string) => (s.endsWith('\r\n') ? s : `${s}\r\n`);

/** Authenticates the message read from `message` (read to its end). */
export async function authenticateMessage(message: Readable, o: AuthenticateInput): Promise<Verdict> {
  const res = await loadMailauth().authenticate(message, {
    ip: o.ip,
    helo: o.helo,
    sender: o.sender,
    mta: o.authservId,
    resolver: o.resolver,
    disableBimi: true,
  });
  const at = res.headers.search(/^Authentication-Results:/im);
  const authenticationResults = at >= 0 ? crlfEnded(res.headers.slice(at).replace(/(\r\n)+$/, '')) : '';
  const spfHeader = res.spf ? res.spf.header : undefined;
  const receivedSpf = spfHeader ? crlfEnded(spfHeader.replace(/(\r\n)+$/, '')) : '';
  const dmarc = res.dmarc || null;
  return {
    authenticationResults,
    receivedSpf,
    junk: dmarc?.status?.result === 'fail' && dmarc.policy === 'reject',
  };
}

/** The verdict when authentication could not run: RFC 8601 §2.2 no-result ("none"), filed in INBOX. */
export function unauthenticated(authservId: string): Verdict {
  return {
    authenticationResults: `Authentication-Results: ${authservId}; none (authentication not performed)\r\n`,
    receivedSpf: '',
    junk: false,
  };
}

/**
 * The verdict for a message whose header mailauth is not given (mail/auth-header-budget.ts says why): "none"
 * with the reason as a comment (RFC 8601 §2.2), filed in Junk. Unchecked, it could be a forgery of a domain
 * whose DMARC policy says to reject it, and a header built to be too costly to check is one sign of that.
 */
export function notAuthenticated(authservId: string, why: string): Verdict {
  return {
    authenticationResults: `Authentication-Results: ${authservId}; none (not authenticated: ${why})\r\n`,
    receivedSpf: '',
    junk: true,
  };
}

// ---- removing incoming Authentication-Results in our name (RFC 8601 §5) --------------------------

/**
 * The authserv-id of an Authentication-Results field value (RFC 8601 §2.2: `authserv-id [CFWS
 * authres-version] ...`, authserv-id a `value`, token or quoted-string), lower case; null when unreadable.
 */
export function authservIdOf(value: string): string | null {
  let s = value.replace(/\r?\n/g, '');
  // Leading CFWS (RFC 5322 §3.2.2): whitespace and comments, which may nest.
  for (;;) {
    s = s.replace(/^[ \t]+/, '');
    if (!s.startsWith('(')) break;
    let depth = 0;
    let i = 0;
    for (; i < s.length; i++) {
      if (s[i] === '\\') i++;
      else if (s[i] === '(') depth++;
      else if (s[i] === ')' && --depth === 0) break;
    }
    s = s.slice(i + 1);
  }
  const quoted = /^"((?:[^"\\]|\\.)*)"/.exec(s);
  const id = quoted ? quoted[1]!.replace(/\\(.)/g, '$1') : /^[^\s;()"]+/.exec(s)?.[0];
  return id ? id.toLowerCase() : null;
}

/**
 * Whether a header block carries a field whose verification hashes the body: DKIM-Signature (RFC 6376
 * §3.7) or ARC-Message-Signature (RFC 8617 §4.1.2); ARC-Seal too, whose chain needs the latter.
 */
export function carriesSignatures(header: Buffer): boolean {
  return /^(?:dkim-signature|arc-message-signature|arc-seal)[ \t]*:/im.test(header.toString('latin1'));
}

/** Offset just past the blank line that ends the header block, or -1 when `buf` holds no such line. */
export function headerEnd(buf: Buffer): number {
  let lineStart = 0;
  for (;;) {
    if (buf[lineStart] === 0x0a) return lineStart + 1;
    if (buf[lineStart] === 0x0d && buf[lineStart + 1] === 0x0a) return lineStart + 2;
    const lf = buf.indexOf(0x0a, lineStart);
    if (lf < 0) return -1;
    lineStart = lf + 1;
  }
}

/**
 * The header block without the Authentication-Results fields whose authserv-id is one of `ours` (lower
 * case), byte for byte otherwise; `removed` counts them. A field is its first line and its folded
 * continuation lines (RFC 5322 §2.2.3).
 */
export function removeOurAuthResults(header: Buffer, ours: ReadonlySet<string>): { header: Buffer; removed: number } {
  const kept: Buffer[] = [];
  let removed = 0;
  for (const [start, end] of fieldSpans(header)) {
    const field = header.subarray(start, end);
    const text = field.toString('latin1');
    const m = /^authentication-results[ \t]*:/i.exec(text);
    const id = m ? authservIdOf(text.slice(m[0].length)) : null;
    if (id !== null && ours.has(id)) removed++;
    else kept.push(field);
  }
  return { header: removed ? Buffer.concat(kept) : header, removed };
}

// ---- the fields we add (RFC 5321 §4.4) -----------------------------------------------------------

/** RFC 5322 §3.3 date-time in UTC: "Mon, 23 Nov 2026 21:17:41 +0000". */
export function rfc5322Date(ms: number): string {
  return new Date(ms).toUTCString().replace(/ GMT$/, ' +0000');
}

// What an untrusted name may carry into a header comment or domain: printable ASCII without the
// characters that would end or nest a comment or a clause.
const unsafe = (s: string) => s.replace(/[^\x21-\x7e]|[()\\;<>"]/g, '?');

export interface ReceivedInput {
  /** The EHLO/HELO argument as given. */
  helo: string;
  ip: string;
  /** Our host name (SVC_HOSTNAME), the "by" domain. */
  hostname: string;
  /** RFC 3848 protocol: ESMTP, ESMTPS, SMTP, ... */
  protocol: string;
  /** smtp-server's session id. */
  id: string;
  /** The negotiated TLS version and cipher (tls.TLSSocket getCipher), or null without TLS. */
  tls: { version: string; name: string; standardName?: string } | null;
  /** The RCPT TO address this copy is for. */
  recipient: string;
  /** The MAIL FROM address; '' for the null sender. */
  sender: string;
  now: number;
}

/**
 * Return-Path (RFC 5321 §4.4: the MAIL FROM as the final delivery records it) and the Received field
 * (RFC 5321 §4.4 Time-stamp-line: from, by, with, id, for; the TLS version and cipher as a comment, as
 * RFC 8314 §4.3 asks: "(using TLSv1.3 with cipher TLS_AES_256_GCM_SHA384)").
 */
export function traceFields(r: ReceivedInput): string {
  const ipLiteral = r.ip.includes(':') ? `[IPv6:${r.ip}]` : `[${r.ip}]`;
  const helo = unsafe(r.helo) || ipLiteral;
  const tls = r.tls
    ? `\r\n\t(using ${unsafe(r.tls.version)} with cipher ${unsafe(r.tls.standardName || r.tls.name)})`
    : '';
  const recipient = r.recipient.replace(/[\r\n<>]/g, '');
  const sender = r.sender.replace(/[\r\n<>]/g, '');
  return (
    `Return-Path: <${sender}>\r\n` +
    `Received: from ${helo} (${ipLiteral})\r\n\tby ${r.hostname} (svc-mail) with ${unsafe(r.protocol) || 'ESMTP'} ` +
    `id ${unsafe(r.id)}${tls}\r\n\tfor <${recipient}>; ${rfc5322Date(r.now)}\r\n`
  );
}
