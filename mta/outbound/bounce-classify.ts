// Pure: an SMTP reply (or a failed connection) → deliver, defer or fail, with a bounce class
// (docs/conventions.md #5, #6). The judgement lives in data, config/bounce-rules.txt, where every rule sits under
// the real replies it was written for; this module only applies it, in this order:
//   1. 2xx                            → deliver (RFC 5321 §4.2.1: positive completion)
//   2. the first rule whose regex matches the reply → its action and class
//   3. the enhanced status code (RFC 3463 §2, §3) → class from subject.detail, action from its class digit
//   4. the basic reply code (RFC 5321 §4.2.1) → 4yz defer, 5yz fail
// A connection that failed before any reply is always defer/connection.
//
// Why text before codes: RFC 5321 §4.2.1 asks a client to act on the code, and mostly we do, but real
// servers overload codes (Outlook answers an unknown recipient with 550 5.4.1 "Access denied", Exchange
// reports one with 5.1.10, which RFC 7505 registered for null MX) and put the only useful fact in the text
// (a DNSBL listing behind a plain 554). Rules that must respect the code pin it in the regex (`^5\d\d `).
import { readFileSync } from 'node:fs';
import { parseReply, type SmtpReply } from '../../mail/smtp-reply.js';

/**
 * What happened, closed so that every consumer can switch on it exhaustively; `other` is the escape
 * hatch for a reply no rule or code explains.
 */
export type BounceClass =
  | 'delivered' // 2xx
  | 'unknown_user' // the mailbox does not exist or is disabled
  | 'mailbox_full' // over quota (4.2.2 defers, 5.2.2 fails: see config/bounce-rules.txt)
  | 'bad_domain' // the recipient's domain does not exist or takes no mail
  | 'relay_denied' // the host we reached does not accept mail for that domain
  | 'too_large' // the message exceeds the receiver's size limit
  | 'policy' // refused by a local policy of the receiver (not content, not reputation)
  | 'spam' // the content was judged spam or harmful
  | 'blocklisted' // our sending IP or domain is on a blocklist or has a bad reputation
  | 'auth_failure' // SPF, DKIM, DMARC or reverse DNS checks failed (RFC 7372)
  | 'tls_required' // the receiver insists on STARTTLS (RFC 3207)
  | 'rate_limited' // throttled: too many connections, messages or recipients
  | 'greylisted' // "come back later" by design
  | 'temporary' // a transient problem at the receiver
  | 'connection' // no SMTP reply at all: refused, timed out, reset, DNS
  | 'other';

export const BOUNCE_CLASSES: readonly BounceClass[] = Object.freeze([
  'delivered',
  'unknown_user',
  'mailbox_full',
  'bad_domain',
  'relay_denied',
  'too_large',
  'policy',
  'spam',
  'blocklisted',
  'auth_failure',
  'tls_required',
  'rate_limited',
  'greylisted',
  'temporary',
  'connection',
  'other',
]);

export type BounceAction = 'deliver' | 'defer' | 'fail';
export type RuleAction = Exclude<BounceAction, 'deliver'>;

export interface Classification {
  action: BounceAction;
  class: BounceClass;
  /** Our short summary for the event; the remote reply itself is kept beside it by the caller. */
  message: string;
  /** The line of the rules file that decided, when a rule did (operators reading a class can find why). */
  rule?: number;
}

/**
 * A reply, or the failure that left us without one. A reply without an enhanced code may still carry
 * one at the start of its text (RFC 2034 §4 puts it there), and its text may keep code prefixes: both
 * are read through.
 */
export type ReplyOrConnectionError = SmtpReply | { connectionError: string };

export interface BounceRule {
  /** 1-based line in the rules text, for error messages and tests. */
  line: number;
  regex: RegExp;
  action: RuleAction;
  class: BounceClass;
  message: string;
  /** The `# reply:` lines quoted above the rule. */
  replies: string[];
}

const RULE_ACTIONS: readonly RuleAction[] = ['defer', 'fail'];
// A rule cannot deliver (only a 2xx does), and "connection" means there was no reply to match.
const RULE_CLASSES: readonly BounceClass[] = BOUNCE_CLASSES.filter((c) => c !== 'delivered' && c !== 'connection');

// RFC 3463 §2: class "." subject "." detail, subject and detail 1 to 3 digits, class 2, 4 or 5.
const ENHANCED = /^([245])\.(\d{1,3})\.(\d{1,3})$/;
const ENHANCED_PREFIX = /^([245]\.\d{1,3}\.\d{1,3})(?=\s|$)\s*/;
// RFC 5321 §4.2: a reply line is the code, then a space (last line) or a hyphen (continuation).
const CODE_PREFIX = /^(\d{3})(?:[ -]|$)/;
/**
 * The text matched against rules is cut to this length. The remote controls it; RFC 5321 §4.5.3.1.5
 * caps a reply line at 512 octets but not the number of lines, and every real reply we classify says
 * what matters in its first few lines.
 */
const MAX_SUBJECT = 2048;
const REPLY_QUOTE = /^#\s*reply:\s*(.*)$/i;

/**
 * The string rules are matched against: "<code> <enhanced> <text>", one line, whitespace collapsed,
 * with the code and enhanced-code prefixes of every reply line removed from the text. A rule can thus
 * pin the code (`^5\d\d `) without caring how the remote split its reply into lines.
 */
function subjectOf(reply: SmtpReply): { subject: string; enhanced: string | null } {
  let enhanced = validEnhanced(reply.enhanced);
  const parts: string[] = [];
  for (const raw of reply.text.split(/\r?\n/)) {
    let line = raw.trim().replace(CODE_PREFIX, '').trimStart();
    const e = ENHANCED_PREFIX.exec(line);
    if (e) {
      enhanced ??= e[1] ?? null;
      line = line.slice(e[0].length);
    }
    if (line !== '') parts.push(line);
  }
  const text = parts.join(' ').replace(/\s+/g, ' ').trim();
  const subject = `${reply.code}${enhanced ? ` ${enhanced}` : ''}${text ? ` ${text}` : ''}`;
  return { subject: subject.slice(0, MAX_SUBJECT), enhanced };
}

function validEnhanced(e: string | null | undefined): string | null {
  const s = e?.trim();
  return s && ENHANCED.test(s) ? s : null;
}

/**
 * Parses and validates a rules file (format in config/bounce-rules.txt). Throws on the first bad line,
 * naming it, so a broken rules file stops the MTA at start instead of misclassifying in production.
 */
export function loadRules(text: string, source = 'bounce rules'): BounceRule[] {
  const rules: BounceRule[] = [];
  let replies: string[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = i + 1;
    const fail = (why: string): never => {
      throw new Error(`${source} line ${line}: ${why}`);
    };
    const trimmed = raw.trim();
    if (trimmed === '') return;
    if (trimmed.startsWith('#')) {
      const q = REPLY_QUOTE.exec(trimmed);
      if (q) {
        const quoted = (q[1] ?? '').trim();
        if (!parseReply(quoted)) fail('a quoted reply must start with its three-digit reply code');
        replies.push(quoted);
      }
      return;
    }
    // Fields are separated by one or more TABs so that columns can be aligned; a regex needing a tab
    // writes \t.
    const fields = raw.split(/\t+/).map((f) => f.trim());
    if (fields.length !== 4 || fields.some((f) => f === '')) {
      fail(
        'expected 4 TAB-separated fields (regex, action, class, message), ' +
          `found ${fields.filter((f) => f !== '').length}`,
      );
    }
    const [pattern, action, cls, message] = fields as [string, string, string, string];
    let regex: RegExp;
    try {
      // 'u' makes sloppy escapes errors instead of silent literals; no 'g' or 'y': test() stays stateless.
      regex = new RegExp(pattern, 'iu');
    } catch (err) {
      return fail(`bad regex: ${(err as Error).message}`);
    }
    if (!(RULE_ACTIONS as readonly string[]).includes(action))
      fail(`action must be one of ${RULE_ACTIONS.join(', ')}, got "${action}"`);
    if (!(RULE_CLASSES as readonly string[]).includes(cls))
      fail(`class must be one of ${RULE_CLASSES.join(', ')}, got "${cls}"`);
    // docs/conventions.md #5: every rule stands under the real reply it was written for, and matches it.
    if (replies.length === 0) fail('a rule must be preceded by at least one "# reply: <the real SMTP reply>" comment');
    for (const quoted of replies) {
      const reply = parseReply(quoted) as SmtpReply;
      if (!regex.test(subjectOf(reply).subject))
        fail(`the regex does not match its quoted reply ${JSON.stringify(quoted)}`);
    }
    rules.push({ line, regex, action: action as RuleAction, class: cls as BounceClass, message, replies });
    replies = [];
  });
  if (replies.length > 0) throw new Error(`${source}: quoted replies at the end of the file have no rule under them`);
  return rules;
}

export const RULES_URL = new URL('../../config/bounce-rules.txt', import.meta.url);
/** Loaded once at import: a bad rules file fails the start, not a delivery. */
export const defaultRules: readonly BounceRule[] = Object.freeze(
  loadRules(readFileSync(RULES_URL, 'utf8'), 'config/bounce-rules.txt'),
);

// RFC 3463 §3.1–§3.8 (and the IANA registry for the later additions): subject.detail → class. The
// action is not here: it comes from the class digit (4 defer, 5 fail), as RFC 3463 §2 defines it.
const DETAIL: Record<string, { class: BounceClass; message: string; temporary?: BounceClass; alwaysDefer?: true }> = {
  '0.0': { class: 'other', message: 'Other undefined status' },
  '1.0': { class: 'unknown_user', message: 'Other address status' },
  '1.1': { class: 'unknown_user', message: 'Bad destination mailbox address' },
  '1.2': { class: 'bad_domain', message: 'Bad destination system address' },
  '1.3': { class: 'unknown_user', message: 'Bad destination mailbox address syntax' },
  '1.4': { class: 'unknown_user', message: 'Destination mailbox address ambiguous' },
  '1.6': { class: 'unknown_user', message: 'Destination mailbox has moved, no forwarding address' },
  '1.7': { class: 'policy', message: "Bad sender's mailbox address syntax" },
  '1.8': { class: 'policy', message: "Bad sender's system address" },
  '1.10': { class: 'bad_domain', message: 'Recipient address has null MX' }, // RFC 7505 §4.1
  // X.2.1 permanent is a disabled account; temporary, a mailbox that is not taking mail right now.
  '2.1': { class: 'unknown_user', message: 'Mailbox disabled, not accepting messages', temporary: 'temporary' },
  // 4.2.2 defers, 5.2.2 fails: the reasoning is above the mailbox-full rules in config/bounce-rules.txt.
  '2.2': { class: 'mailbox_full', message: 'Mailbox full' },
  '2.3': { class: 'too_large', message: 'Message length exceeds administrative limit' },
  '3.4': { class: 'too_large', message: 'Message too big for system' },
  '4.4': { class: 'bad_domain', message: 'Unable to route', temporary: 'connection' },
  '4.5': { class: 'rate_limited', message: 'Mail system congestion' },
  // RFC 5321 §4.5.3.1.10: "too many recipients" is a limit per transaction, temporary even when a
  // server (following RFC 821) says 552; the rest of the recipients go in the next transaction.
  '5.3': { class: 'rate_limited', message: 'Too many recipients', alwaysDefer: true },
  '7.1': { class: 'policy', message: 'Delivery not authorized, message refused' },
  '7.10': { class: 'tls_required', message: 'Encryption needed' },
  '7.11': { class: 'tls_required', message: 'Encryption required for requested authentication mechanism' },
  // RFC 7293 (RRVS): the mailbox or domain changed owner since the address was collected.
  '7.17': { class: 'unknown_user', message: 'Mailbox owner has changed' },
  '7.18': { class: 'bad_domain', message: 'Domain owner has changed' },
  // RFC 7372 §3: email authentication failures.
  '7.20': { class: 'auth_failure', message: 'No passing DKIM signature found' },
  '7.21': { class: 'auth_failure', message: 'No acceptable DKIM signature found' },
  '7.22': { class: 'auth_failure', message: 'No valid author-matched DKIM signature found' },
  '7.23': { class: 'auth_failure', message: 'SPF validation failed' },
  '7.24': { class: 'auth_failure', message: 'SPF validation error' },
  '7.25': { class: 'auth_failure', message: 'Reverse DNS validation failed' },
  '7.26': { class: 'auth_failure', message: 'Multiple authentication checks failed' },
  '7.27': { class: 'policy', message: 'Sender address has null MX' }, // RFC 7505 §4.2
};

// An unknown detail: the subject alone still names the area that failed (RFC 3463 §2, §3).
const SUBJECT: Record<string, { permanent: BounceClass; temporary: BounceClass; message: string }> = {
  '0': { permanent: 'other', temporary: 'temporary', message: 'Other or undefined status' },
  '1': { permanent: 'unknown_user', temporary: 'temporary', message: 'Addressing status' },
  '2': { permanent: 'other', temporary: 'temporary', message: 'Mailbox status' },
  '3': { permanent: 'other', temporary: 'temporary', message: 'Mail system status' },
  '4': { permanent: 'other', temporary: 'connection', message: 'Network and routing status' },
  '5': { permanent: 'other', temporary: 'temporary', message: 'Mail delivery protocol status' },
  '6': { permanent: 'other', temporary: 'temporary', message: 'Message content or media status' },
  '7': { permanent: 'policy', temporary: 'policy', message: 'Security or policy status' },
};

function byEnhancedCode(code: number, enhanced: string | null): Classification | null {
  const m = enhanced ? ENHANCED.exec(enhanced) : null;
  if (!m) return null;
  const [, klass, subject, detail] = m as unknown as [string, string, string, string];
  // RFC 2034 §4: the status code "must agree with the primary response code". When a server gets that
  // wrong (Exchange's "451 5.7.3 STARTTLS is required"), the enhanced code is not trusted and the basic
  // code, which is what RFC 5321 §4.2.1 tells a client to act on, decides.
  if (klass !== String(code)[0] || klass === '2') return null;
  const temporary = klass === '4';
  const action: RuleAction = temporary ? 'defer' : 'fail';
  const d = DETAIL[`${subject}.${detail}`];
  if (d) {
    return {
      action: d.alwaysDefer ? 'defer' : action,
      class: temporary ? (d.temporary ?? d.class) : d.class,
      message: `${d.message} (${enhanced})`,
    };
  }
  const s = SUBJECT[subject];
  if (s) return { action, class: temporary ? s.temporary : s.permanent, message: `${s.message} (${enhanced})` };
  return null;
}

/**
 * Decides what one SMTP reply means for the message. Pure: same input, same answer, no I/O. `rules`
 * defaults to config/bounce-rules.txt and is a parameter only so that tests can pass their own.
 */
export function classify(reply: ReplyOrConnectionError, rules: readonly BounceRule[] = defaultRules): Classification {
  if ('connectionError' in reply) {
    // No reply: the peer never had a say, so nothing about the recipient is known. RFC 5321 §4.5.4.1:
    // keep trying, and let the retry schedule decide when to give up.
    return {
      action: 'defer',
      class: 'connection',
      message: 'Could not connect to, or lost the connection with, the receiving server',
    };
  }
  const { code } = reply;
  if (!Number.isInteger(code) || code < 100 || code > 599) {
    return { action: 'defer', class: 'other', message: `Unintelligible reply code ${String(code)}` };
  }
  if (code >= 200 && code < 300)
    return { action: 'deliver', class: 'delivered', message: 'Accepted by the receiving server' };

  const { subject, enhanced } = subjectOf(reply);
  const rule = rules.find((r) => r.regex.test(subject));
  if (rule) return { action: rule.action, class: rule.class, message: rule.message, rule: rule.line };

  const byEnhanced = byEnhancedCode(code, enhanced);
  if (byEnhanced) return byEnhanced;

  // RFC 5321 §4.2.1: 4yz is a transient negative completion (try again), 5yz a permanent one.
  if (code >= 400 && code < 500) return { action: 'defer', class: 'temporary', message: `Temporary failure (${code})` };
  if (code >= 500) return { action: 'fail', class: 'other', message: `Permanent failure (${code})` };
  // 1yz and 3yz are never a final answer to a transaction (RFC 5321 §4.2.1): a confused peer, retry.
  return { action: 'defer', class: 'other', message: `Unexpected reply code ${code}` };
}
