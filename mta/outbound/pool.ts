// Per-destination SMTP connection pools on nodemailer's smtp-connection (the maintained continuation of
// the `smtp-connection` package, design card). A destination is (recipient domain, source address):
// its connections are reused across messages (no new TCP + TLS + EHLO per message), at most
// `perDestination` are open at once, and idle ones close after `idleMs`.
import { isIP } from 'node:net';
import { X509Certificate } from 'node:crypto';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
import { matchChain } from '../../mail/dane.js';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import type { Logger } from 'pino';
import type { Resolver } from '../../mail/resolver.js';
import { systemClock, type Clock } from '../../mail/clock.js';
import { MESSAGE_TOO_BIG, parseReply, SmtpReply } from '../../mail/smtp-reply.js';
import { resolveRoute, type MxHost } from './route.js';
import { reportPolicyOf, type PlannedHost, type TlsPlan, type TlsPolicy, type TlsPolicyKind } from './tls-policy.js';
import type { TlsVerified } from './tls-policy.js';
import { certificateResult, type ResultType, type TlsSession } from '../../mail/tls-report.js';

export interface PoolOptions {
  resolver: Resolver;
  log: Logger;
  /** EHLO name (SVC_HOSTNAME). */
  hostname: string;
  /** Source address → its own EHLO name (SVC_SOURCE_ADDRESSES `address@name`); others give `hostname`. */
  ehloNames?: Readonly<Record<string, string>>;
  /** Remote port (SVC_OUTBOUND_PORT). */
  port: number;
  /** Which TLS each destination requires (MTA-STS); absent: opportunistic STARTTLS, nothing verified. */
  tlsPolicy?: TlsPolicy;
  /** SVC_ALLOW_PRIVATE_MX: deliver to MX hosts on loopback and private addresses. */
  allowPrivateMx?: boolean;
  /** Time for certificate validity checks (DANE-TA); the Context's clock. */
  clock?: Clock;
  perDestination?: number;
  idleMs?: number;
  /** Messages per connection before it is replaced (some receivers limit them per session). */
  maxMessages?: number;
  connectTimeoutMs?: number;
  socketTimeoutMs?: number;
  /**
   * Told of every TLS session (each connection that got as far as TLS, and each MX host a policy left out),
   * for TLS reports (RFC 8460); must be cheap: it runs on the delivery path.
   */
  onTlsSession?: (s: TlsSession) => void;
}

export interface Destination {
  domain: string;
  source: string | null;
}

/** A recipient of a transaction to several that the receiver refused at RCPT TO, with its own reply. */
export interface RcptRefusal {
  to: string;
  reply: SmtpReply;
}

/**
 * What one attempt talked to and how (issue 19 item 1): every delivery event carries it in its detail.
 * host and ip are those of the last connection tried (null when none was); tlsVerified says whether the
 * certificate was verified and against what; tlsPolicy what the domain required.
 */
export interface Transport {
  host: string | null;
  ip: string | null;
  tls: boolean;
  /** "TLSv1.3", as OpenSSL names it. */
  tlsVersion: string | null;
  /** The cipher suite's IANA/OpenSSL name. */
  tlsCipher: string | null;
  tlsVerified: TlsVerified;
  tlsPolicy: TlsPolicyKind;
  /** The MTA-STS mode, when tlsPolicy is mta-sts. */
  tlsPolicyMode?: 'enforce' | 'testing';
  /** What the policy found wrong: the reason of a deferral in enforce, a report in testing. */
  tlsFailures?: string[];
  /** Why a domain's policy could not be used (fetch failed, ...), when that is so. */
  tlsPolicyNote?: string;
  /** MX addresses skipped because they are not public (SVC_ALLOW_PRIVATE_MX off). */
  refusedMx?: string[];
}

export type SendResult = (
  | { kind: 'accepted'; host: string; reply: string; tls: boolean; rejected?: RcptRefusal[] }
  /** The receiver (or our routing, for null MX and NXDOMAIN) answered with a refusal. */
  | { kind: 'reply'; host: string | null; reply: SmtpReply; rejected?: RcptRefusal[] }
  /** No answer at all: DNS, TCP, TLS or a dropped session. */
  | { kind: 'connection'; host: string | null; error: string }
) & { transport: Transport };

const NO_TRANSPORT: Transport = {
  host: null,
  ip: null,
  tls: false,
  tlsVersion: null,
  tlsCipher: null,
  tlsVerified: 'none',
  tlsPolicy: 'none',
};

interface SmtpError extends Error {
  code?: string;
  responseCode?: number;
  response?: string;
  recipient?: string;
  rejectedErrors?: SmtpError[];
}

interface Conn {
  smtp: SMTPConnection;
  host: string;
  transport: Transport;
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

/** Each refused recipient's own reply (nodemailer's rejectedErrors), for a transaction to several. */
const refusalsOf = (errors: SmtpError[] | undefined): RcptRefusal[] | undefined => {
  const out = (errors ?? []).flatMap((e) => {
    const reply = e.recipient !== undefined ? replyOf({ ...e, rejectedErrors: undefined }) : null;
    return reply ? [{ to: e.recipient!, reply }] : [];
  });
  return out.length ? out : undefined;
};

export function createPools(opts: PoolOptions) {
  const perDestination = opts.perDestination ?? 8;
  const idleMs = opts.idleMs ?? 10_000;
  const maxMessages = opts.maxMessages ?? 100;
  const clock = opts.clock ?? systemClock;
  const pools = new Map<string, Pool>();
  let closed = false;

  const poolOf = (dest: Destination) => {
    // Keyed by source address: sessions from different addresses (each with its own EHLO name) never share.
    const key = `${dest.source ?? ''}|${dest.domain}`;
    let p = pools.get(key);
    if (!p) pools.set(key, (p = { dest, idle: [], open: 0, waiters: [] }));
    return p;
  };

  /** Failures of one connection carry what was learnt of its TLS before it ended. */
  type ConnectError = SmtpError & { transport?: Transport };

  /** What the session negotiated, read from nodemailer's socket once EHLO after STARTTLS is done. */
  function negotiated(smtp: SMTPConnection): {
    tls: boolean;
    version: string | null;
    cipher: string | null;
    webpki: boolean;
    authError: string | null;
    /** The chain the server sent, leaf first (for DANE). */
    chain: X509Certificate[];
  } {
    const secure = Boolean((smtp as unknown as { secure?: boolean }).secure);
    const socket = (smtp as unknown as { _socket?: TLSSocket })._socket;
    if (!secure || !socket || typeof socket.getProtocol !== 'function')
      return { tls: false, version: null, cipher: null, webpki: false, authError: null, chain: [] };
    // `authorized` covers the chain (system roots + SVC_EXTRA_CA_CERTS) and the name: node checks the
    // certificate against the servername, which is the MX host name (RFC 8461 §4.1, RFC 6125).
    return {
      tls: true,
      version: socket.getProtocol(),
      cipher: socket.getCipher()?.name ?? null,
      webpki: socket.authorized,
      authError: socket.authorized ? null : String(socket.authorizationError ?? 'certificate not verified'),
      chain: peerChain(socket),
    };
  }

  /** The certificates the peer sent, leaf first, following issuerCertificate up to a self-issued one. */
  function peerChain(socket: TLSSocket): X509Certificate[] {
    const out: X509Certificate[] = [];
    let c: DetailedPeerCertificate | undefined = socket.getPeerCertificate(true);
    const seen = new Set<DetailedPeerCertificate>();
    while (c && c.raw && !seen.has(c) && out.length < 10) {
      seen.add(c);
      out.push(new X509Certificate(c.raw));
      c = c.issuerCertificate;
    }
    return out;
  }

  function connectOne(dest: Destination, planned: PlannedHost, address: string, plan: TlsPlan): Promise<Conn> {
    const host = planned.host.name;
    const enforce = planned.require !== 'none';
    return new Promise((resolve, reject) => {
      const smtp = new SMTPConnection({
        host: address,
        port: opts.port,
        name: (dest.source && opts.ehloNames?.[dest.source]) || opts.hostname,
        localAddress: dest.source ?? undefined,
        // Without a policy, opportunistic STARTTLS (RFC 3207): encrypt when offered, go on in plaintext
        // when the upgrade is refused, and deliver whatever the certificate: nothing says which name an
        // MX must present. The certificate is still checked, to report it. With an enforced policy
        // STARTTLS is required and an unverified certificate ends the connection before MAIL FROM.
        opportunisticTLS: !enforce,
        requireTLS: enforce,
        servername: isIP(host) ? undefined : host,
        tls: { rejectUnauthorized: false, ...(opts.tlsPolicy ? { secureContext: opts.tlsPolicy.secureContext } : {}) },
        connectionTimeout: opts.connectTimeoutMs ?? 30_000,
        greetingTimeout: opts.connectTimeoutMs ?? 30_000,
        socketTimeout: opts.socketTimeoutMs ?? 5 * 60_000,
      } as ConstructorParameters<typeof SMTPConnection>[0]);
      const transport: Transport = {
        ...NO_TRANSPORT,
        host,
        ip: address,
        tlsPolicy: planned.policy,
        ...(planned.policy === 'mta-sts' && plan.mode ? { tlsPolicyMode: plan.mode } : {}),
        ...(plan.failures.length ? { tlsFailures: [...plan.failures] } : {}),
        ...(plan.note ? { tlsPolicyNote: plan.note } : {}),
      };
      const conn: Conn = { smtp, host, transport, messages: 0, usable: true, idleTimer: null };
      let settled = false;
      const session = (result: ResultType | null, detail: string | null) =>
        reportSession(dest.domain, planned, plan, result, detail, address);
      const fail = (err: ConnectError) => {
        if (settled) return;
        settled = true;
        // A required STARTTLS the server did not offer, or a handshake that failed (nodemailer's ETLS).
        if (err.code === 'ETLS' && enforce)
          session(
            planned.require === 'dane'
              ? 'dane-required'
              : /STARTTLS/i.test(err.message)
                ? 'starttls-not-supported'
                : 'validation-failure',
            err.message,
          );
        err.transport = transport;
        reject(err);
      };
      // After connect, errors and the peer closing only make the connection unusable; the send in
      // progress (if any) gets the error through its own callback.
      smtp.on('error', (err: SmtpError) => {
        conn.usable = false;
        fail(err);
      });
      smtp.on('end', () => {
        conn.usable = false;
      });
      smtp.connect(() => {
        if (settled) return;
        const n = negotiated(smtp);
        Object.assign(transport, {
          tls: n.tls,
          tlsVersion: n.version,
          tlsCipher: n.cipher,
          tlsVerified: n.webpki ? 'webpki' : 'none',
        });
        let problem: string | null;
        if (!n.tls) problem = `${host} did not negotiate TLS`;
        else if (planned.require === 'dane') {
          // RFC 7672 §2.2: TLSA records present but none usable still require TLS, without authentication.
          const m = planned.tlsa?.length ? matchChain(planned.tlsa, n.chain, host, clock.now()) : null;
          if (m?.ok) transport.tlsVerified = 'dane';
          problem = m && !m.ok ? `certificate of ${host}: ${m.reason}` : null;
        } else problem = n.webpki ? null : `certificate of ${host} not verified (${n.authError})`;
        const result: ResultType | null = !problem
          ? null
          : !n.tls
            ? planned.require === 'dane'
              ? 'dane-required'
              : 'starttls-not-supported'
            : planned.require === 'dane'
              ? 'tlsa-invalid'
              : (certificateResult(n.authError) ?? 'validation-failure');
        if (problem && enforce) {
          // RFC 8461 §5, RFC 7672 §2.2: the policy failed for this host: no message goes to it; the next
          // host may do, and when none does the message waits.
          session(result, problem);
          conn.usable = false;
          smtp.close();
          transport.tlsFailures = [...(transport.tlsFailures ?? []), problem];
          const which = planned.policy === 'dane' ? 'DANE' : 'MTA-STS enforce';
          const err: ConnectError = new Error(`${which}: ${problem}`);
          err.code = 'ETLSPOLICY';
          return fail(err);
        }
        // RFC 8461 §5 testing mode: delivered all the same, the failure recorded.
        if (problem && planned.policy === 'mta-sts' && plan.mode === 'testing')
          transport.tlsFailures = [...(transport.tlsFailures ?? []), problem];
        // Without a policy only a session without TLS is a failure: no certificate is required (RFC 8460 §4.3.1).
        if (planned.require === 'none' && planned.policy === 'none')
          session(n.tls ? (plan.stsFailure ?? null) : 'starttls-not-supported', n.tls ? (plan.note ?? null) : problem);
        else session(result, problem);
        settled = true;
        resolve(conn);
      });
    });
  }

  function reportSession(
    domain: string,
    planned: PlannedHost,
    plan: TlsPlan,
    result: ResultType | null,
    detail: string | null,
    ip: string | null,
  ) {
    if (!opts.onTlsSession) return;
    try {
      opts.onTlsSession({
        domain,
        policy: reportPolicyOf(planned, plan),
        result,
        receivingMx: planned.host.name,
        receivingIp: ip,
        detail,
      });
    } catch (err) {
      opts.log.error({ err }, 'recording a TLS session failed');
    }
  }

  async function open(dest: Destination): Promise<Opened> {
    const family = dest.source ? (isIP(dest.source) as 4 | 6) : null;
    const route = await resolveRoute(opts.resolver, dest.domain, family, opts.allowPrivateMx ?? false);
    const failure = (
      r:
        | { kind: 'reply'; host: string | null; reply: SmtpReply }
        | { kind: 'connection'; host: string | null; error: string },
      transport: Transport,
    ): Opened => ({ failure: { ...r, transport } });
    if (route.kind === 'unroutable') return failure({ kind: 'reply', host: null, reply: route.reply }, NO_TRANSPORT);
    if (route.kind === 'dns_error')
      return failure({ kind: 'connection', host: null, error: route.message }, NO_TRANSPORT);
    const refused = route.refused.length ? { refusedMx: route.refused } : {};
    const plan: TlsPlan = opts.tlsPolicy
      ? await opts.tlsPolicy.plan(dest.domain, route.hosts)
      : {
          policy: 'none',
          hosts: route.hosts.map((host: MxHost) => ({ host, require: 'none', policy: 'none' })),
          failures: [],
        };
    const planned: Transport = {
      ...NO_TRANSPORT,
      ...refused,
      tlsPolicy: plan.policy,
      ...(plan.mode ? { tlsPolicyMode: plan.mode } : {}),
      ...(plan.failures.length ? { tlsFailures: plan.failures } : {}),
      ...(plan.note ? { tlsPolicyNote: plan.note } : {}),
    };
    if (opts.onTlsSession)
      for (const r of plan.refused ?? [])
        opts.onTlsSession({
          domain: dest.domain,
          policy: r.policy,
          result: r.result,
          receivingMx: r.host,
          detail: r.detail,
        });
    if (!plan.hosts.length) {
      // RFC 8461 §5, RFC 7672 §2.2: with no MX host the policy allows, the message waits (the policy, the
      // MX records or the TLSA records may change); tlsFailures says why each host was left out.
      return failure(
        { kind: 'connection', host: null, error: `no MX host of ${dest.domain} passes its TLS policy` },
        planned,
      );
    }
    let last: Exclude<SendResult, { kind: 'accepted' }> = {
      kind: 'connection',
      host: null,
      error: 'no MX host',
      transport: planned,
    };
    // RFC 5321 §5.1: try the hosts in order; a host that does not answer, greets with a refusal, or
    // (under a policy) fails its TLS requirement passes the message on to the next.
    const failures: string[] = [...plan.failures];
    for (const p of plan.hosts) {
      for (const address of p.host.addresses) {
        try {
          const conn = await connectOne(dest, p, address, plan);
          Object.assign(conn.transport, refused);
          if (failures.length || conn.transport.tlsFailures)
            conn.transport.tlsFailures = [...new Set([...failures, ...(conn.transport.tlsFailures ?? [])])];
          return { conn };
        } catch (err) {
          const e = err as ConnectError;
          const transport: Transport = { ...(e.transport ?? planned), ...refused };
          for (const f of transport.tlsFailures ?? []) if (!failures.includes(f)) failures.push(f);
          if (failures.length) transport.tlsFailures = [...failures];
          const reply = e.code === 'ETLSPOLICY' ? null : replyOf(e);
          last = reply
            ? { kind: 'reply', host: p.host.name, reply, transport }
            : { kind: 'connection', host: p.host.name, error: `${address}: ${e.message}`, transport };
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
    to: string[],
    raw: Buffer,
  ): Promise<{ err: SmtpError | null; response: string; rejected?: RcptRefusal[] }> {
    return new Promise((resolve) => {
      // size: checked against the receiver's SIZE and announced in MAIL FROM (RFC 1870).
      c.smtp.send(
        { from, to, size: raw.length },
        raw,
        (err: SmtpError | null, info?: { response?: string; rejectedErrors?: SmtpError[] }) => {
          resolve({ err, response: info?.response ?? '', rejected: refusalsOf(info?.rejectedErrors) });
        },
      );
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

  /**
   * Delivers one message to one recipient, or to several of the destination's domain in one transaction (the
   * result then lists the recipients refused at RCPT TO, each with its reply). Never throws for remote
   * trouble: the result says what happened.
   */
  async function send(dest: Destination, from: string, to: string | string[], raw: Buffer): Promise<SendResult> {
    const rcpts = typeof to === 'string' ? [to] : to;
    if (closed) return { kind: 'connection', host: null, error: 'MTA stopping', transport: NO_TRANSPORT };
    const p = poolOf(dest);
    // A reused connection the server closed meanwhile fails before a byte of the message is sent:
    // that is not the message's fault, so it gets one more try on a fresh connection.
    for (let attempt = 0; ; attempt++) {
      let c = await acquire(p);
      if (closed) {
        if (c) release(p, c);
        else drop(p, null);
        return { kind: 'connection', host: null, error: 'MTA stopping', transport: NO_TRANSPORT };
      }
      if (!c) {
        const opened = await open(dest).catch((err: Error): Opened => ({
          failure: { kind: 'connection', host: null, error: err.message, transport: NO_TRANSPORT },
        }));
        if ('failure' in opened) {
          drop(p, null);
          return opened.failure;
        }
        c = opened.conn;
      }
      const reused = c.messages > 0;
      c.messages++;
      const { err, response, rejected } = await transmit(c, from, rcpts, raw);
      if (!err) {
        const tls = Boolean((c.smtp as unknown as { secure?: boolean }).secure);
        release(p, c);
        return {
          kind: 'accepted',
          host: c.host,
          reply: response,
          tls,
          transport: c.transport,
          ...(rejected ? { rejected } : {}),
        };
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
          transport: c.transport,
        };
      }
      const reply = replyOf(err);
      if ((err.code === 'EENVELOPE' || err.code === 'EMESSAGE') && reply && reply.code !== 421 && c.usable) {
        // The server refused this message; the session itself is fine: reset it and keep it.
        await reset(c);
        release(p, c);
        const refused = rcpts.length > 1 ? refusalsOf(err.rejectedErrors) : undefined;
        return {
          kind: 'reply',
          host: c.host,
          reply,
          transport: c.transport,
          ...(refused ? { rejected: refused } : {}),
        };
      }
      c.usable = false;
      release(p, c);
      if (reused && !reply && attempt === 0) continue;
      return reply
        ? { kind: 'reply', host: c.host, reply, transport: c.transport }
        : { kind: 'connection', host: c.host, error: err.message, transport: c.transport };
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
