// Per-destination SMTP connection pools on nodemailer's smtp-connection (the maintained continuation of
// the `smtp-connection` package, design card). A destination is (recipient domain, source address):
// its connections are reused across messages (no new TCP + TLS + EHLO per message), at most
// `perDestination` are open at once, and idle ones close after `idleMs`.
import { isIP } from 'node:net';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Logger } from 'pino';
import type { Resolver } from '../../mail/resolver.js';
import { MESSAGE_TOO_BIG, parseReply, SmtpReply } from '../../mail/smtp-reply.js';
import { resolveRoute } from './route.js';

export interface PoolOptions {
  resolver: Resolver;
  log: Logger;
  /** EHLO name (SVC_HOSTNAME). */
  hostname: string;
  /** Remote port (SVC_OUTBOUND_PORT). */
  port: number;
  perDestination?: number;
  idleMs?: number;
  /** Messages per connection before it is replaced (some receivers limit them per session). */
  maxMessages?: number;
  connectTimeoutMs?: number;
  socketTimeoutMs?: number;
}

export interface Destination {
  domain: string;
  source: string | null;
}

export type SendResult =
  | { kind: 'accepted'; host: string; reply: string; tls: boolean }
  /** The receiver (or our routing, for null MX and NXDOMAIN) answered with a refusal. */
  | { kind: 'reply'; host: string | null; reply: SmtpReply }
  /** No answer at all: DNS, TCP, TLS or a dropped session. */
  | { kind: 'connection'; host: string | null; error: string };

interface SmtpError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  rejectedErrors?: SmtpError[];
}

interface Conn {
  smtp: SMTPConnection;
  host: string;
  messages: number;
  usable: boolean;
  idleTimer: NodeJS.Timeout | null;
}

interface Pool {
  dest: Destination;
  idle: Conn[];
  open: number;
  /** Callers waiting for a connection: handed one, or null when a slot freed up to open one. */
  waiters: ((c: Conn | null) => void)[];
}

type Opened = { conn: Conn } | { failure: Exclude<SendResult, { kind: 'accepted' }> };

/** The remote reply inside a nodemailer error (the first refused recipient's, for EENVELOPE), if it has one. */
const replyOf = (err: SmtpError): SmtpReply | null => {
  const e = err.rejectedErrors?.[0] ?? err;
  const text = e.response ?? err.response;
  const code = e.responseCode ?? err.responseCode;
  if (!code || !text) return null;
  const parsed = parseReply(text);
  return parsed?.code === code ? parsed : new SmtpReply(code, null, text);
};

export function createPools(opts: PoolOptions) {
  const perDestination = opts.perDestination ?? 8;
  const idleMs = opts.idleMs ?? 10_000;
  const maxMessages = opts.maxMessages ?? 100;
  const pools = new Map<string, Pool>();
  let closed = false;

  const poolOf = (dest: Destination) => {
    const key = `${dest.source ?? ''}|${dest.domain}`;
    let p = pools.get(key);
    if (!p) pools.set(key, (p = { dest, idle: [], open: 0, waiters: [] }));
    return p;
  };

  function connectOne(dest: Destination, host: string, address: string): Promise<Conn> {
    return new Promise((resolve, reject) => {
      const smtp = new SMTPConnection({
        host: address,
        port: opts.port,
        name: opts.hostname,
        localAddress: dest.source ?? undefined,
        // Opportunistic STARTTLS (RFC 3207): encrypt when offered, and go on in plaintext when the
        // upgrade is refused. Certificates are not verified: without MTA-STS or DANE nothing says
        // which name an MX must present, so checking would only make mail to sloppy hosts wait.
        opportunisticTLS: true,
        servername: isIP(host) ? undefined : host,
        tls: { rejectUnauthorized: false },
        connectionTimeout: opts.connectTimeoutMs ?? 30_000,
        greetingTimeout: opts.connectTimeoutMs ?? 30_000,
        socketTimeout: opts.socketTimeoutMs ?? 5 * 60_000,
      } as ConstructorParameters<typeof SMTPConnection>[0]);
      const conn: Conn = { smtp, host, messages: 0, usable: true, idleTimer: null };
      let settled = false;
      // After connect, errors and the peer closing only make the connection unusable; the send in
      // progress (if any) gets the error through its own callback.
      smtp.on('error', (err: SmtpError) => {
        conn.usable = false;
        if (!settled) {
          settled = true;
          reject(err);
        }
      });
      smtp.on('end', () => {
        conn.usable = false;
      });
      smtp.connect(() => {
        if (settled) return;
        settled = true;
        resolve(conn);
      });
    });
  }

  async function open(dest: Destination): Promise<Opened> {
    const family = dest.source ? (isIP(dest.source) as 4 | 6) : null;
    const route = await resolveRoute(opts.resolver, dest.domain, family);
    if (route.kind === 'unroutable') return { failure: { kind: 'reply', host: null, reply: route.reply } };
    if (route.kind === 'dns_error') return { failure: { kind: 'connection', host: null, error: route.message } };
    let last: Exclude<SendResult, { kind: 'accepted' }> = { kind: 'connection', host: null, error: 'no MX host' };
    // RFC 5321 §5.1: try the hosts in order; a host that does not answer, or greets with a refusal,
    // passes the message on to the next.
    for (const host of route.hosts) {
      for (const address of host.addresses) {
        try {
          return { conn: await connectOne(dest, host.name, address) };
        } catch (err) {
          const e = err as SmtpError;
          const reply = replyOf(e);
          last = reply
            ? { kind: 'reply', host: host.name, reply }
            : { kind: 'connection', host: host.name, error: `${address}: ${e.message}` };
        }
      }
    }
    return { failure: last };
  }

  function acquire(p: Pool): Promise<Conn | null> {
    while (p.idle.length) {
      const c = p.idle.pop()!;
      if (c.idleTimer) clearTimeout(c.idleTimer);
      if (c.usable) return Promise.resolve(c);
      drop(p, c);
    }
    if (p.open < perDestination) {
      p.open++;
      return Promise.resolve(null); // the caller opens one in the slot it now holds
    }
    return new Promise((resolve) => p.waiters.push(resolve));
  }

  function drop(p: Pool, c: Conn | null) {
    if (c) {
      c.usable = false;
      c.smtp.close();
    }
    p.open--;
    const next = p.waiters.shift();
    if (next) {
      p.open++;
      next(null);
    }
  }

  function release(p: Pool, c: Conn) {
    if (!c.usable || c.messages >= maxMessages || closed) {
      if (c.usable && !closed) c.smtp.quit();
      else c.smtp.close();
      c.usable = false;
      drop(p, null);
      return;
    }
    const next = p.waiters.shift();
    if (next) return next(c);
    c.idleTimer = setTimeout(() => {
      const i = p.idle.indexOf(c);
      if (i >= 0) p.idle.splice(i, 1);
      c.usable = false;
      c.smtp.quit();
      drop(p, null);
    }, idleMs);
    c.idleTimer.unref();
    p.idle.push(c);
  }

  function transmit(
    c: Conn,
    from: string,
    to: string,
    raw: Buffer,
  ): Promise<{ err: SmtpError | null; response: string }> {
    return new Promise((resolve) => {
      // size: checked against the receiver's SIZE and announced in MAIL FROM (RFC 1870).
      c.smtp.send({ from, to: [to], size: raw.length }, raw, (err: SmtpError | null, info?: { response?: string }) => {
        resolve({ err, response: info?.response ?? '' });
      });
    });
  }

  function reset(c: Conn): Promise<void> {
    return new Promise((resolve) => {
      c.smtp.reset((err: Error | null) => {
        if (err) c.usable = false;
        resolve();
      });
    });
  }

  /** Delivers one message to one recipient. Never throws for remote trouble: the result says what happened. */
  async function send(dest: Destination, from: string, to: string, raw: Buffer): Promise<SendResult> {
    if (closed) return { kind: 'connection', host: null, error: 'MTA stopping' };
    const p = poolOf(dest);
    // A reused connection the server closed meanwhile fails before a byte of the message is sent:
    // that is not the message's fault, so it gets one more try on a fresh connection.
    for (let attempt = 0; ; attempt++) {
      let c = await acquire(p);
      if (closed) {
        if (c) release(p, c);
        else drop(p, null);
        return { kind: 'connection', host: null, error: 'MTA stopping' };
      }
      if (!c) {
        const opened = await open(dest).catch((err: Error) => ({
          failure: { kind: 'connection' as const, host: null, error: err.message },
        }));
        if ('failure' in opened) {
          drop(p, null);
          return opened.failure;
        }
        c = opened.conn;
      }
      const reused = c.messages > 0;
      c.messages++;
      const { err, response } = await transmit(c, from, to, raw);
      if (!err) {
        const tls = Boolean((c.smtp as unknown as { secure?: boolean }).secure);
        release(p, c);
        return { kind: 'accepted', host: c.host, reply: response, tls };
      }
      // The receiver's EHLO SIZE limit (RFC 1870) is checked before MAIL FROM: a permanent refusal of
      // this message, not a connection problem, so it bounces rather than retrying for days.
      if (err.code === 'EMESSAGE' && !err.responseCode && /larger than allowed/i.test(err.message) && c.usable) {
        await reset(c);
        release(p, c);
        return {
          kind: 'reply',
          host: c.host,
          reply: MESSAGE_TOO_BIG.with(`${err.message} (the receiver's SIZE limit)`),
        };
      }
      const reply = replyOf(err);
      if ((err.code === 'EENVELOPE' || err.code === 'EMESSAGE') && reply && reply.code !== 421 && c.usable) {
        // The server refused this message; the session itself is fine: reset it and keep it.
        await reset(c);
        release(p, c);
        return { kind: 'reply', host: c.host, reply };
      }
      c.usable = false;
      release(p, c);
      if (reused && !reply && attempt === 0) continue;
      return reply ? { kind: 'reply', host: c.host, reply } : { kind: 'connection', host: c.host, error: err.message };
    }
  }

  /** Closes idle connections now; busy ones close when their send finishes. */
  async function close(): Promise<void> {
    closed = true;
    for (const p of pools.values()) {
      for (const c of p.idle.splice(0)) {
        if (c.idleTimer) clearTimeout(c.idleTimer);
        c.smtp.quit();
        drop(p, null);
      }
      for (const w of p.waiters.splice(0)) {
        p.open++; // the waiter holds a slot, which it gives back when it sees `closed`
        w(null);
      }
    }
  }

  return { send, close };
}

export type Pools = ReturnType<typeof createPools>;
