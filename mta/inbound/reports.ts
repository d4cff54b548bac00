// What a report received at a VERP return path means for the message it names (docs/decisions.md #10):
// a DSN (RFC 3464) that failed bounces it, one that is delayed records a deferral; an ARF report
// (RFC 5965) records a complaint; a plain-text bounce without a DSN part is read for the common
// patterns (an SMTP reply quoted in the text, or the usual phrases). Pure but for MIME parsing.
import { SmtpReply } from '../../mail/smtp-reply.js';
import { classify } from '../outbound/bounce-classify.js';
import { SUPPRESSING } from '../outbound/outcomes.js';
import { fieldGroups, mimeParts, type Part } from './mime.js';

export type ReportOutcome =
  | { kind: 'bounced'; detail: Record<string, unknown>; suppress: boolean }
  | { kind: 'deferred'; detail: Record<string, unknown> }
  | { kind: 'complained'; detail: Record<string, unknown> }
  | { kind: 'ignored'; why: string };

/** "rfc822; a@b" → "a@b" (RFC 3464 §2.3.2 address-type prefix). */
const addressOf = (v: string | undefined) =>
  (v ?? '')
    .replace(/^[^;]*;\s*/, '')
    .replace(/^<|>$/g, '')
    .trim()
    .toLowerCase();

const REPLY = /\b([245]\d\d)(?:[ -]+([245]\.\d{1,3}\.\d{1,3}))?[ -]+([^\r\n]*)/;

/** An SMTP reply quoted somewhere in `text` (a Diagnostic-Code, or the body of a plain bounce). */
function quotedReply(text: string): SmtpReply | null {
  const m = REPLY.exec(text);
  if (!m || m[1]![0] === '2') return null;
  return new SmtpReply(Number(m[1]), m[2] ?? null, m[3]!.trim());
}

/** What a failed DSN reports: the reply its Diagnostic-Code quotes, else one made of its Status (RFC 3464 §2.3.4). */
function reportedReply(diagnostic: string, status: string | null): SmtpReply {
  const quoted = quotedReply(diagnostic);
  if (quoted) return status && !quoted.enhanced ? new SmtpReply(quoted.code, status, quoted.text) : quoted;
  const code = status?.startsWith('4') ? 450 : 550;
  return diagnostic
    ? new SmtpReply(code, status, diagnostic)
    : new SmtpReply(code, status ?? '5.0.0', 'delivery failed');
}

function fromDsn(part: Part, recipient: string): ReportOutcome {
  const groups = fieldGroups(part.body.toString('utf8'));
  const perMessage = groups[0] ?? {};
  const perRecipient = groups.slice(1);
  const mine = perRecipient.find((g) =>
    [g['final-recipient'], g['original-recipient']].some((v) => addressOf(v) === recipient.toLowerCase()),
  );
  const g = mine ?? perRecipient[0];
  if (!g) return { kind: 'ignored', why: 'a delivery-status part without a recipient' };
  const action = (g['action'] ?? '').toLowerCase();
  const status = /^[245]\.\d{1,3}\.\d{1,3}/.exec(g['status'] ?? '')?.[0] ?? null;
  const diagnostic = (g['diagnostic-code'] ?? '').replace(/^smtp;\s*/i, '');
  const detail = {
    source: 'dsn',
    action,
    status,
    diagnostic: diagnostic || null,
    reportingMta: addressOf(perMessage['reporting-mta']) || null,
    remoteMta: addressOf(g['remote-mta']) || null,
  };
  if (action === 'delayed') return { kind: 'deferred', detail };
  if (action !== 'failed') return { kind: 'ignored', why: `DSN action ${action || '(none)'}` };
  const reply = reportedReply(diagnostic, status);
  const c = classify(reply);
  // The remote gave up: bounced whatever the class; the address is suppressed only when it is bad.
  return {
    kind: 'bounced',
    detail: { ...detail, class: c.class, message: c.message },
    suppress: SUPPRESSING.has(c.class),
  };
}

function fromArf(part: Part): ReportOutcome {
  const f = fieldGroups(part.body.toString('utf8'))[0] ?? {};
  const type = (f['feedback-type'] ?? '').toLowerCase();
  const detail = {
    source: 'arf',
    feedbackType: type,
    userAgent: f['user-agent'] ?? null,
    arrivalDate: f['arrival-date'] ?? null,
    reportingMta: addressOf(f['reporting-mta']) || null,
  };
  // RFC 5965 §7.3: abuse, fraud, virus and other are complaints; not-spam is the opposite, and
  // auth-failure (RFC 6591) is about authentication, not about the recipient's wishes.
  if (['abuse', 'fraud', 'virus', 'other'].includes(type)) return { kind: 'complained', detail };
  return { kind: 'ignored', why: `feedback type ${type || '(none)'}` };
}

const PLAIN_PATTERNS: { re: RegExp; reply: SmtpReply }[] = [
  {
    re: new RegExp(
      '\\b(no such (user|mailbox|recipient)|no mailbox here|(user|mailbox|recipient|address)( name)? (is )?' +
        "(unknown|not found|does not exist|doesn't exist|invalid|disabled|unavailable))\\b",
      'i',
    ),
    reply: new SmtpReply(550, '5.1.1', 'mailbox unknown (plain-text bounce)'),
  },
  {
    re: /\b(mailbox (is )?full|over (the )?quota|quota exceeded)\b/i,
    reply: new SmtpReply(552, '5.2.2', 'mailbox full (plain-text bounce)'),
  },
  {
    re: /\b(host or domain name not found|domain (does not exist|not found))\b/i,
    reply: new SmtpReply(550, '5.1.2', 'domain not found (plain-text bounce)'),
  },
];
const PLAIN_DELAY =
  /\b(has not yet been delivered|delivery (has been )?delayed|will (continue to )?(retry|try again))\b/i;

function fromPlain(parts: Part[]): ReportOutcome {
  const text = parts
    .filter((p) => !p.embedded && p.contentType === 'text/plain')
    .map((p) => p.body.toString('utf8'))
    .join('\n');
  if (!text) return { kind: 'ignored', why: 'no report part and no text' };
  if (PLAIN_DELAY.test(text))
    return { kind: 'deferred', detail: { source: 'text', message: 'delivery delayed (plain-text notice)' } };
  const reply = quotedReply(text) ?? PLAIN_PATTERNS.find((p) => p.re.test(text))?.reply ?? null;
  if (!reply) return { kind: 'ignored', why: 'no DSN part and no recognizable bounce text' };
  const c = classify(reply);
  if (c.action === 'deliver') return { kind: 'ignored', why: 'a 2xx reply' };
  if (reply.code < 500)
    return { kind: 'deferred', detail: { source: 'text', class: c.class, message: c.message, reply: reply.message } };
  return {
    kind: 'bounced',
    detail: { source: 'text', class: c.class, message: c.message, reply: reply.message },
    suppress: SUPPRESSING.has(c.class),
  };
}

/** A received report, MIME-parsed once, whatever the number of our messages it is addressed about. */
export interface ParsedReport {
  parts: Part[];
}

export async function parseReport(raw: Buffer): Promise<ParsedReport> {
  return { parts: await mimeParts(raw) };
}

/** `recipient`: the original recipient of our message (to pick its block out of a multi-recipient DSN). */
export function reportOutcome(report: ParsedReport, recipient: string): ReportOutcome {
  const { parts } = report;
  const outer = parts.filter((p) => !p.embedded);
  const dsn = outer.find(
    (p) => p.contentType === 'message/delivery-status' || p.contentType === 'message/global-delivery-status',
  );
  if (dsn) return fromDsn(dsn, recipient);
  const arf = outer.find((p) => p.contentType === 'message/feedback-report');
  if (arf) return fromArf(arf);
  return fromPlain(parts);
}

/**
 * Which of `candidates` (the recipients of a message to several) a report names: the Final-Recipient or
 * Original-Recipient of a DSN's per-recipient blocks (RFC 3464 §2.3.1, §2.3.2), an ARF report's
 * Original-Rcpt-To (RFC 5965 §3.2), or an address quoted in a plain-text bounce. Compared case-insensitively,
 * as remote MTAs often change the case of what they quote.
 */
export function reportRecipients(report: ParsedReport, candidates: readonly string[]): string[] {
  const outer = report.parts.filter((p) => !p.embedded);
  const dsn = outer.find(
    (p) => p.contentType === 'message/delivery-status' || p.contentType === 'message/global-delivery-status',
  );
  const arf = outer.find((p) => p.contentType === 'message/feedback-report');
  let named: Set<string>;
  if (dsn) {
    named = new Set(
      fieldGroups(dsn.body.toString('utf8'))
        .slice(1)
        .flatMap((g) => [addressOf(g['final-recipient']), addressOf(g['original-recipient'])]),
    );
  } else if (arf) {
    named = new Set([addressOf((fieldGroups(arf.body.toString('utf8'))[0] ?? {})['original-rcpt-to'])]);
  } else {
    const text = report.parts
      .filter((p) => !p.embedded && p.contentType === 'text/plain')
      .map((p) => p.body.toString('utf8'))
      .join('\n')
      .toLowerCase();
    return candidates.filter((c) => text.includes(c.toLowerCase()));
  }
  return candidates.filter((c) => named.has(c.toLowerCase()));
}
