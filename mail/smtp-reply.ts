// One SMTP reply type for every layer (docs/conventions.md #3): the MX listener throws it from any depth
// and it is written to the wire in one place (smtpHooks below); the outbound pool turns what a remote
// server answered into one, and bounce classification reads it. Anything thrown that is not an
// SmtpReply is our own failure and answers 451 4.3.0, never a 5xx: smtp-server's default for a hook
// error without `responseCode` is a permanent 550, which would make the sender drop the message.
//
// An Error subclass rather than a plain value plus a wrapper error: a reply is raised far from where
// it is written (a recipient check deep in a hook), and one type that is both the value and the thing
// thrown leaves no second shape to convert between. The stack it captures is never read.
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { SMTPServerAddress, SMTPServerDataStream, SMTPServerOptions, SMTPServerSession } from 'smtp-server';

// RFC 3463 §2: class "." subject "." detail; subject and detail 1 to 3 digits, class 2, 4 or 5.
const ENHANCED = /^[245]\.\d{1,3}\.\d{1,3}$/;
const ENHANCED_PREFIX = /^([245]\.\d{1,3}\.\d{1,3})(?:\s+|$)/;
// RFC 5321 §4.2: a reply line is the code, then a space (last line) or a hyphen (continuation).
const CODE_PREFIX = /^(\d{3})(?:[ -]|$)/;

export class SmtpReply extends Error {
  /** The basic reply code (RFC 5321 §4.2). */
  readonly code: number;
  /** The enhanced status code "5.1.1" (RFC 3463 §2), when there is one. */
  readonly enhanced: string | null;
  /** The text after the codes; the lines of a multi-line reply joined by "\n". */
  readonly text: string;
  /** RFC 5321 §4.2.1: 4yz is a transient negative completion (try again); 5yz (and 2yz, 3yz) is not. */
  readonly temporary: boolean;

  constructor(code: number, enhanced: string | null, text: string) {
    const e = enhanced?.trim() || null;
    super(render(code, e, text));
    this.name = 'SmtpReply';
    this.code = code;
    this.enhanced = e;
    this.text = text;
    this.temporary = code >= 400 && code < 500;
  }

  /** The same codes with another text (a constant with the particulars of one case). */
  with(text: string): SmtpReply {
    return new SmtpReply(this.code, this.enhanced, text);
  }
}

/** The reply as it goes on the wire: "550-5.1.1 first line\n550 5.1.1 last line" (RFC 2034 §4: codes on each line). */
function render(code: number, enhanced: string | null, text: string): string {
  const lines = text.split(/\r?\n/);
  return lines
    .map((l, i) => `${code}${i < lines.length - 1 ? '-' : ' '}${enhanced ? `${enhanced} ` : ''}${l}`.trimEnd())
    .join('\n');
}

/**
 * A reply as received ("550-5.1.1 The email account...\n550 5.1.1 ..."), or null when it does not start
 * with a reply code. The enhanced code is the one at the start of the first line's text (RFC 2034 §4);
 * each line loses its basic code and that enhanced code, so that rendering it again gives the reply back.
 */
export function parseReply(raw: string): SmtpReply | null {
  const lines = raw.trim().split(/\r?\n/);
  const first = CODE_PREFIX.exec(lines[0] ?? '');
  if (!first) return null;
  const code = Number(first[1]);
  const enhanced = ENHANCED_PREFIX.exec(lines[0]!.slice(first[0].length))?.[1] ?? null;
  const text = lines
    .map((line) => {
      let l = line.trim();
      const c = CODE_PREFIX.exec(l);
      if (c && Number(c[1]) === code) l = l.slice(c[0].length);
      const e = ENHANCED_PREFIX.exec(l);
      if (e && e[1] === enhanced) l = l.slice(e[0].length);
      return l;
    })
    .join('\n');
  return new SmtpReply(code, enhanced, text);
}

/** Whether `s` is an enhanced status code (RFC 3463 §2). */
export const isEnhancedCode = (s: string | null | undefined): s is string => typeof s === 'string' && ENHANCED.test(s);

// The replies we send. RFC 5321 §4.2.2 and §4.2.3 list the basic codes, RFC 3463 §3 the enhanced ones
// (the IANA "Enumerated Status Codes" registry for the later ones).

/** RFC 5321 §4.2.2 550 (mailbox unavailable) + RFC 3463 §3.2 X.1.1 (bad destination mailbox address). */
export const MAILBOX_UNKNOWN = new SmtpReply(550, '5.1.1', 'No such mailbox here');
/** RFC 5321 §4.2.2 550 + RFC 3463 §3.2 X.1.2 (bad destination system address): the domain does not exist. */
export const DOMAIN_UNKNOWN = new SmtpReply(550, '5.1.2', 'No such domain');
/** RFC 7504 §3 556 (domain does not accept mail) + RFC 7505 §4.1 X.1.10 (recipient address has null MX). */
export const NULL_MX = new SmtpReply(556, '5.1.10', 'The domain does not accept mail (null MX)');
/**
 * RFC 5321 §4.2.2 550 + RFC 3463 §3.8 X.7.1 (delivery not authorized, message refused): a recipient at a
 * domain we do not receive for. We are no open relay (RFC 5321 §3.6.2, §7.1).
 */
export const RELAY_DENIED = new SmtpReply(550, '5.7.1', 'Relaying denied: we do not receive mail for that domain');
/**
 * RFC 5321 §4.2.2 552 (exceeded storage allocation) + RFC 3463 §3.3 X.2.2 (mailbox full), at RCPT. RFC 5321
 * §4.5.3.1.10 has clients treat a 552 to RCPT as temporary, so the sender keeps the message and retries.
 */
export const MAILBOX_FULL = new SmtpReply(552, '5.2.2', 'mailbox is full');
/** RFC 5321 §4.2.2 552 (exceeded storage allocation) + RFC 3463 §3.4 X.3.4 (message too big for system). */
export const MESSAGE_TOO_BIG = new SmtpReply(552, '5.3.4', 'Message too big');
/**
 * RFC 5321 §4.2.2 451 (local error in processing) + RFC 3463 §3.4 X.3.0 (other mail system status):
 * what every unexpected failure of ours answers. The client keeps the message and tries again.
 */
export const LOCAL_ERROR = new SmtpReply(451, '4.3.0', 'Temporary failure, try again later');

/** An error in smtp-server's shape: it writes `${responseCode} ${message}`, the message led by the enhanced code. */
export function toSmtpServerError(reply: SmtpReply): Error & { responseCode: number } {
  const message = reply.text.replace(/\s*\r?\n\s*/g, ' ');
  return Object.assign(new Error(reply.enhanced ? `${reply.enhanced} ${message}` : message), {
    responseCode: reply.code,
  });
}

/** What the hook wrapper logs through: pino's `error(obj, msg)`, without depending on pino here. */
export interface ErrorLog {
  error(obj: object, msg: string): void;
}

/** smtp-server hooks as async functions: resolve to accept, throw an SmtpReply to refuse. */
export interface SmtpHooks {
  onConnect?(session: SMTPServerSession): Promise<void>;
  onSecure?(socket: Socket | TLSSocket, session: SMTPServerSession): Promise<void>;
  onMailFrom?(address: SMTPServerAddress, session: SMTPServerSession): Promise<void>;
  onRcptTo?(address: SMTPServerAddress, session: SMTPServerSession): Promise<void>;
  /** Resolves with the text of the 250, or nothing for smtp-server's own. */
  onData?(stream: SMTPServerDataStream, session: SMTPServerSession): Promise<string | void>;
}

type HookOptions = Pick<SMTPServerOptions, 'onConnect' | 'onSecure' | 'onMailFrom' | 'onRcptTo' | 'onData'>;

/**
 * The smtp-server options for `hooks`: every error a hook throws reaches the wire through here. An
 * SmtpReply is written as it is; anything else is logged and answered with LOCAL_ERROR (451 4.3.0).
 */
export function smtpHooks(hooks: SmtpHooks, log: ErrorLog): HookOptions {
  const refusal = (hook: string, session: SMTPServerSession, err: unknown) => {
    if (err instanceof SmtpReply) return toSmtpServerError(err);
    log.error({ err, hook, session: session.id }, `SMTP ${hook} failed unexpectedly; answered 451 4.3.0`);
    return toSmtpServerError(LOCAL_ERROR);
  };
  const out: HookOptions = {};
  const { onConnect, onSecure, onMailFrom, onRcptTo, onData } = hooks;
  if (onConnect) {
    out.onConnect = (session, cb) =>
      void onConnect(session).then(
        () => cb(),
        (err: unknown) => cb(refusal('onConnect', session, err)),
      );
  }
  if (onSecure) {
    out.onSecure = (socket, session, cb) =>
      void onSecure(socket, session).then(
        () => cb(),
        (err: unknown) => cb(refusal('onSecure', session, err)),
      );
  }
  if (onMailFrom) {
    out.onMailFrom = (address, session, cb) =>
      void onMailFrom(address, session).then(
        () => cb(),
        (err: unknown) => cb(refusal('onMailFrom', session, err)),
      );
  }
  if (onRcptTo) {
    out.onRcptTo = (address, session, cb) =>
      void onRcptTo(address, session).then(
        () => cb(),
        (err: unknown) => cb(refusal('onRcptTo', session, err)),
      );
  }
  if (onData) {
    out.onData = (stream, session, cb) =>
      void onData(stream, session).then(
        (message) => (message ? cb(null, message) : cb()),
        // A hook that gives up before reading the whole message needs nothing more: smtp-server reads
        // and drops the rest before it replies.
        (err: unknown) => cb(refusal('onData', session, err)),
      );
  }
  return out;
}
