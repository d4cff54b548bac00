// SMTP connection pools on nodemailer's smtp-connection (the maintained continuation of the `smtp-connection`
// package, design card; its DATA phase sped up in smtp-connection.ts), one per MX address rather than per
// recipient domain (docs/operations.md, "Connections"): the many domains one provider hosts share its
// connections, as Postfix's per-nexthop and KumoMTA's per-site queues do. Connections are reused across
// messages (no new TCP + TLS + EHLO per message), capped per MX address and in total, and closed after `idleMs`
// idle; an address that did not answer is skipped for a while (host-failures.ts).
import { isIP } from 'node:net';
import { X509Certificate } from 'node:crypto';
import type { DetailedPeerCertificate, TLSSocket } from 'node:tls';
import { matchChain } from '../../mail/dane.js';
import { SmtpConnection } from './smtp-connection.js';
import type { Logger } from 'pino';
import type { Resolver } from '../../mail/resolver.js';
import { systemClock, type Clock } from '../../mail/clock.js';
import { MESSAGE_TOO_BIG, parseReply, SmtpReply } from '../../mail/smtp-reply.js';
import { resolveRoute, type MxHost } from './route.js';
import { reportPolicyOf, type PlannedHost, type TlsPlan, type TlsPolicy, type TlsPolicyKind } from './tls-policy.js';
import type { TlsVerified } from './tls-policy.js';
import { certificateResult, tlsaString, type ResultType, type TlsSession } from '../../mail/tls-report.js';
import { createHostFailures, isDeadHost } from './host-failures.js';

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
  /** Sessions open at once to one MX address, whatever the domains and pools (SVC_MAX_SESSIONS_PER_HOST). */
  maxSessionsPerHost?: number;
  /** Sessions open at once in all (SVC_MAX_SESSIONS). */
  maxSessions?: number;
  /** How long an MX address that did not answer is skipped (SVC_MX_FAILURE_TTL); 0: it never is. */
  failureTtlMs?: number;
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
  smtp: SmtpConnection;
  pool: Pool;
  host: string;
  ip: string;
  /** What the session negotiated: the same for every domain it carries. */
  tls: boolean;
  tlsVersion: string | null;
  tlsCipher: string | null;
  tlsVerified: TlsVerified;
  /** What the pool's TLS requirement found wrong with the session (only ever recorded, or it would be closed). */
  problem: string | null;
  result: ResultType | null;
  /** Domains told of this session (onTlsSession): RFC 8460 counts sessions per policy domain. */
  reported: Set<string>;
  messages: number;
  usable: boolean;
  idleTimer: NodeJS.Timeout | null;
  /** Order in which connections went idle: the longest idle is closed first to make room. */
  idleSeq: number;
}

interface Pool {
  key: string;
  ip: string;
  idle: Conn[];
  /** Connections of this pool open or being opened. */
  open: number;
}

/** A send waiting for a connection of its pool: handed one, or null when it may open one in a slot it now holds. */
interface Waiter {
  pool: Pool;
  resolve: (c: Conn | null) => void;
}

type Failure = Exclude<SendResult, { kind: 'accepted' }>;

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

/** Why a message is not sent or signed: its body is no longer in the spool. */
export const BODY_MISSING = 'message body missing from the spool';

export function createPools(opts: PoolOptions) {
  const perHost = opts.maxSessionsPerHost ?? 10;
  const maxSessions = opts.maxSessions ?? 200;
  const failureTtlMs = opts.failureTtlMs ?? 60_000;
  const idleMs = opts.idleMs ?? 10_000;
  const maxMessages = opts.maxMessages ?? 100;
  const clock = opts.clock ?? systemClock;
  const hostFailures = createHostFailures(clock, failureTtlMs);
  const pools = new Map<string, Pool>();
  /** Sends waiting for a connection, oldest first, across pools. */
  const waiters: Waiter[] = [];
  /** Sessions open or being opened, in all and per MX address (the caps count these). */
  let total = 0;
  const perIp = new Map<string, number>();
  let idleSeq = 0;
  let closed = false;

  /**
   * Pools are keyed by MX address, not by recipient domain, so that the domains one provider hosts share its
   * connections. A connection may carry mail for another domain only when it satisfies the TLS requirement that
   * domain has for this host, so the key holds everything that requirement depends on, and connections are
   * shared only between domains whose requirement for the host is the same:
   * - the source address: the bind address and its EHLO name (docs/operations.md, Dedicated IPs);
   * - the MX host name: the SNI sent and the name the certificate was verified against (RFC 8461 §4.1 checks
   *   the MX host name, and the domain's plan kept this host only when its policy's mx patterns match that
   *   name), and the owner of the TLSA records (`_25._tcp.<host>`, RFC 7672 §2.2);
   * - the address dialled;
   * - the requirement class: none (opportunistic STARTTLS, the certificate only recorded; no policy or MTA-STS
   *   testing), webpki (STARTTLS required and the certificate verified for the host name: MTA-STS enforce), or
   *   dane with the exact set of usable TLSA records the chain was matched against.
   * A stricter connection would satisfy a weaker requirement too, but separate classes are simpler to trust;
   * the cost is one more pool for a host whose domains differ. What each domain's policy says beside that (its
   * mode, failures, report policy) is applied per message, not taken from the connection.
   */
  const keyOf = (source: string | null, planned: PlannedHost, address: string) => {
    const cls =
      planned.require === 'dane' ? `dane:${(planned.tlsa ?? []).map(tlsaString).sort().join(',')}` : planned.require;
    return `${source ?? ''}|${planned.host.name.toLowerCase()}|${address}|${cls}`;
  };

  const poolOf = (source: string | null, planned: PlannedHost, address: string) => {
    const key = keyOf(source, planned, address);
    let p = pools.get(key);
    if (!p) pools.set(key, (p = { key, ip: address, idle: [], open: 0 }));
    return p;
  };

  /** Failures of one connection carry what was learnt of its TLS before it ended. */
  type ConnectError = SmtpError & { transport?: Transport; timeoutType?: string; originalCode?: string };

  /** What the session negotiated, read from nodemailer's socket once EHLO after STARTTLS is done. */
  function negotiated(smtp: SmtpConnection): {
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

  function connectOne(
    dest: Destination,
    planned: PlannedHost,
    address: string,
    plan: TlsPlan,
    pool: Pool,
  ): Promise<Conn> {
    const host = planned.host.name;
    const enforce = planned.require !== 'none';
    return new Promise((resolve, reject) => {
      const smtp = new SmtpConnection({
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
      } as ConstructorParameters<typeof SmtpConnection>[0]);
      // What a failed connection learnt, for the attempt's event.
      const transport: Transport = {
        ...NO_TRANSPORT,
        host,
        ip: address,
        tlsPolicy: planned.policy,
        ...(planned.policy === 'mta-sts' && plan.mode ? { tlsPolicyMode: plan.mode } : {}),
        ...(plan.failures.length ? { tlsFailures: [...plan.failures] } : {}),
        ...(plan.note ? { tlsPolicyNote: plan.note } : {}),
      };
      const conn: Conn = {
        smtp,
        pool,
        host,
        ip: address,
        tls: false,
        tlsVersion: null,
        tlsCipher: null,
        tlsVerified: 'none',
        problem: null,
        result: null,
        reported: new Set(),
        messages: 0,
        usable: true,
        idleTimer: null,
        idleSeq: 0,
      };
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
      // After connect, errors and the peer closing only make the connection unusable (an idle one leaves its
      // pool at once); the send in progress (if any) gets the error through its own callback.
      const gone = () => {
        conn.usable = false;
        if (settled) forgetIdle(conn);
      };
      smtp.on('error', (err: SmtpError) => {
        gone();
        fail(err);
      });
      smtp.on('end', gone);
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
        let verified: TlsVerified = n.webpki ? 'webpki' : 'none';
        if (!n.tls) problem = `${host} did not negotiate TLS`;
        else if (planned.require === 'dane') {
          // RFC 7672 §2.2: TLSA records present but none usable still require TLS, without authentication.
          const m = planned.tlsa?.length ? matchChain(planned.tlsa, n.chain, host, clock.now()) : null;
          if (m?.ok) verified = 'dane';
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
        Object.assign(conn, {
          tls: n.tls,
          tlsVersion: n.version,
          tlsCipher: n.cipher,
          tlsVerified: verified,
          problem,
          result,
        });
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

  /**
   * What an attempt for `domain` over connection `c` reports: the session's own facts, and what the domain's
   * policy says of them. The first message of each domain on a connection counts one TLS session for it.
   */
  function transportFor(
    c: Conn,
    domain: string,
    planned: PlannedHost,
    plan: TlsPlan,
    failures: string[],
    refused: Pick<Transport, 'refusedMx'>,
  ): Transport {
    if (!c.reported.has(domain)) {
      c.reported.add(domain);
      // Without a policy only a session without TLS is a failure: no certificate is required (RFC 8460 §4.3.1).
      if (planned.require === 'none' && planned.policy === 'none')
        reportSession(
          domain,
          planned,
          plan,
          c.tls ? (plan.stsFailure ?? null) : 'starttls-not-supported',
          c.tls ? (plan.note ?? null) : c.problem,
          c.ip,
        );
      else reportSession(domain, planned, plan, c.result, c.problem, c.ip);
    }
    // RFC 8461 §5 testing mode: delivered all the same, the failure recorded.
    const own = c.problem && planned.policy === 'mta-sts' && plan.mode === 'testing' ? [c.problem] : [];
    const all = [...new Set([...failures, ...own])];
    return {
      host: c.host,
      ip: c.ip,
      tls: c.tls,
      tlsVersion: c.tlsVersion,
      tlsCipher: c.tlsCipher,
      tlsVerified: c.tlsVerified,
      tlsPolicy: planned.policy,
      ...(planned.policy === 'mta-sts' && plan.mode ? { tlsPolicyMode: plan.mode } : {}),
      ...(all.length ? { tlsFailures: all } : {}),
      ...(plan.note ? { tlsPolicyNote: plan.note } : {}),
      ...refused,
    };
  }

  type Planned = { failure: Failure } | { plan: TlsPlan; refused: Pick<Transport, 'refusedMx'>; base: Transport };

  /** The domain's route and TLS plan: which hosts, in which order, under which requirement. */
  async function planFor(dest: Destination): Promise<Planned> {
    const family = dest.source ? (isIP(dest.source) as 4 | 6) : null;
    const route = await resolveRoute(opts.resolver, dest.domain, family, opts.allowPrivateMx ?? false);
    if (route.kind === 'unroutable')
      return { failure: { kind: 'reply', host: null, reply: route.reply, transport: NO_TRANSPORT } };
    if (route.kind === 'dns_error')
      return { failure: { kind: 'connection', host: null, error: route.message, transport: NO_TRANSPORT } };
    const refused = route.refused.length ? { refusedMx: route.refused } : {};
    const plan: TlsPlan = opts.tlsPolicy
      ? await opts.tlsPolicy.plan(dest.domain, route.hosts)
      : {
          policy: 'none',
          hosts: route.hosts.map((host: MxHost) => ({ host, require: 'none', policy: 'none' })),
          failures: [],
        };
    const base: Transport = {
      ...NO_TRANSPORT,
      ...refused,
      tlsPolicy: plan.policy,
      ...(plan.mode ? { tlsPolicyMode: plan.mode } : {}),
      ...(plan.failures.length ? { tlsFailures: plan.failures } : {}),
      ...(plan.note ? { tlsPolicyNote: plan.note } : {}),
    };
    if (!plan.hosts.length) {
      reportRefused(dest.domain, plan);
      // RFC 8461 §5, RFC 7672 §2.2: with no MX host the policy allows, the message waits (the policy, the
      // MX records or the TLSA records may change); tlsFailures says why each host was left out.
      return {
        failure: {
          kind: 'connection',
          host: null,
          error: `no MX host of ${dest.domain} passes its TLS policy`,
          transport: base,
        },
      };
    }
    return { plan, refused, base };
  }

  /** The hosts a policy left out, each a failed TLS session (RFC 8460 §4.3), once per connection planned. */
  function reportRefused(domain: string, plan: TlsPlan) {
    if (opts.onTlsSession)
      for (const r of plan.refused ?? [])
        opts.onTlsSession({ domain, policy: r.policy, result: r.result, receivingMx: r.host, detail: r.detail });
  }

  /** Takes a slot for a new connection of `p` when the caps allow, closing idle connections to make room. */
  function takeSlot(p: Pool): boolean {
    if ((perIp.get(p.ip) ?? 0) >= perHost && !evictIdle((c) => c.ip === p.ip)) return false;
    if (total >= maxSessions && !evictIdle(() => true)) return false;
    total++;
    perIp.set(p.ip, (perIp.get(p.ip) ?? 0) + 1);
    p.open++;
    return true;
  }

  /** Closes the connection idle longest among those `match` accepts; false when there is none. */
  function evictIdle(match: (c: Conn) => boolean): boolean {
    let oldest: Conn | null = null;
    for (const q of pools.values())
      for (const c of q.idle) if (match(c) && (!oldest || c.idleSeq < oldest.idleSeq)) oldest = c;
    if (!oldest) return false;
    const q = oldest.pool;
    q.idle.splice(q.idle.indexOf(oldest), 1);
    if (oldest.idleTimer) clearTimeout(oldest.idleTimer);
    oldest.usable = false;
    oldest.smtp.quit();
    uncount(q);
    return true;
  }

  /** A connection of `p` is gone (or was never opened): its slot is free. */
  function uncount(p: Pool) {
    total--;
    const n = (perIp.get(p.ip) ?? 1) - 1;
    if (n > 0) perIp.set(p.ip, n);
    else perIp.delete(p.ip);
    p.open--;
    if (p.open === 0 && !p.idle.length && !waiters.some((w) => w.pool === p)) pools.delete(p.key);
  }

  function free(p: Pool) {
    uncount(p);
    wake();
  }

  /** Serves the waiters that can go now, oldest first: an idle connection of their pool, or a free slot. */
  function wake() {
    for (let i = 0; i < waiters.length;) {
      const w = waiters[i]!;
      const c = takeIdle(w.pool);
      if (c || takeSlot(w.pool)) {
        waiters.splice(i, 1);
        w.resolve(c);
      } else i++;
    }
  }

  function takeIdle(p: Pool): Conn | null {
    while (p.idle.length) {
      const c = p.idle.pop()!;
      if (c.idleTimer) clearTimeout(c.idleTimer);
      c.idleTimer = null;
      if (c.usable) return c;
      c.smtp.close();
      uncount(p);
    }
    return null;
  }

  /** An idle connection the server closed leaves its pool at once. */
  function forgetIdle(c: Conn) {
    const i = c.pool.idle.indexOf(c);
    if (i < 0) return;
    c.pool.idle.splice(i, 1);
    if (c.idleTimer) clearTimeout(c.idleTimer);
    c.smtp.close();
    free(c.pool);
  }

  /** A connection of the pool, or null: the caller holds a slot to open one. Waits when the caps are reached. */
  function acquire(p: Pool): Promise<Conn | null> {
    const c = takeIdle(p);
    if (c || takeSlot(p)) return Promise.resolve(c);
    return new Promise((resolve) => waiters.push({ pool: p, resolve }));
  }

  function release(c: Conn) {
    const p = c.pool;
    if (!c.usable || c.messages >= maxMessages || closed) {
      if (c.usable && !closed) c.smtp.quit();
      else c.smtp.close();
      c.usable = false;
      return free(p);
    }
    const i = waiters.findIndex((w) => w.pool === p);
    if (i >= 0) return waiters.splice(i, 1)[0]!.resolve(c);
    c.idleSeq = ++idleSeq;
    c.idleTimer = setTimeout(() => {
      const at = p.idle.indexOf(c);
      if (at < 0) return;
      p.idle.splice(at, 1);
      c.usable = false;
      c.smtp.quit();
      free(p);
    }, idleMs);
    c.idleTimer.unref();
    p.idle.push(c);
    // A waiter held back by a cap may take this connection's place.
    if (waiters.length) wake();
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

  const STOPPING: SendResult = { kind: 'connection', host: null, error: 'MTA stopping', transport: NO_TRANSPORT };

  /**
   * Delivers one message to one recipient, or to several of the destination's domain in one transaction (the
   * result then lists the recipients refused at RCPT TO, each with its reply). Never throws for remote
   * trouble: the result says what happened.
   */
  async function send(
    dest: Destination,
    from: string,
    to: string | string[],
    /**
     * The message, or what makes it once a session is ready for it (undefined: it is gone, and the attempt fails
     * as a connection problem would), so that a send waiting for a session holds no copy of its body.
     */
    raw: Buffer | (() => Buffer | undefined),
    progress: (stage: string) => void = () => {},
  ): Promise<SendResult> {
    const rcpts = typeof to === 'string' ? [to] : to;
    if (closed) return STOPPING;
    progress(`resolving ${dest.domain}`);
    let planned: Planned;
    try {
      planned = await planFor(dest);
    } catch (err) {
      return { kind: 'connection', host: null, error: (err as Error).message, transport: NO_TRANSPORT };
    }
    if ('failure' in planned) return planned.failure;
    const { plan, refused, base } = planned;
    // TLS failures met on the way (plan, then each host tried), for the event of the attempt.
    const failures: string[] = [...plan.failures];
    const attempt: Attempt = { dest, plan, refused, base, failures, from, rcpts, raw, planReported: false, progress };
    let last: Failure = { kind: 'connection', host: null, error: 'no MX host', transport: base };
    const skipped: string[] = [];
    let tried = false;
    // RFC 5321 §5.1: try the hosts in order; a host that does not answer, greets with a refusal, or (under a
    // policy) fails its TLS requirement passes the message on to the next. An address that did not answer
    // lately is passed over without a dial (host-failures.ts).
    for (const p of plan.hosts) {
      for (const address of p.host.addresses) {
        const down = hostFailures.get(dest.source, address);
        const r = down ? { skipped: down } : await sendVia(attempt, p, address);
        if ('result' in r) return r.result;
        if ('skipped' in r) {
          skipped.push(`${p.host.name} ${address}: ${r.skipped}`);
          continue;
        }
        tried = true;
        last = r.next;
      }
    }
    if (closed) return STOPPING;
    const note = `within the last ${Math.round(failureTtlMs / 1000)} s, so not dialled again yet`;
    if (!tried) {
      // Every address failed lately: the message waits at once rather than dialling a dead host again.
      const transport = { ...base, ...(failures.length ? { tlsFailures: [...failures] } : {}) };
      const error = `every MX host of ${dest.domain} failed to answer ${note}: ${skipped.join('; ')}`;
      return { kind: 'connection', host: plan.hosts[0]!.host.name, error, transport };
    }
    if (skipped.length && last.kind === 'connection')
      last = { ...last, error: `${last.error} (also: ${skipped.join('; ')}, failed ${note})` };
    return last;
  }

  /**
   * The attempt's message, made now if it is made on demand (docs/decisions.md #76), or why there is none: it is
   * gone, or could not be read (a spool closed under a stopping MTA).
   */
  function messageOf(a: Attempt): Buffer | string {
    if (typeof a.raw !== 'function') return a.raw;
    try {
      return a.raw() ?? BODY_MISSING;
    } catch (err) {
      return `message body not read from the spool: ${(err as Error).message}`;
    }
  }

  interface Attempt {
    dest: Destination;
    plan: TlsPlan;
    refused: Pick<Transport, 'refusedMx'>;
    base: Transport;
    failures: string[];
    from: string;
    rcpts: string[];
    raw: Buffer | (() => Buffer | undefined);
    /** The policy's refused hosts were reported for this attempt (once, at its first new connection). */
    planReported: boolean;
    /** Told what the attempt is doing now (the worker's slow-delivery warning names it). */
    progress: (stage: string) => void;
  }

  /**
   * One message over one MX address: `result` when the address answered (the message's outcome), `next` when
   * no connection could be had (the next address may do), `skipped` when it failed lately.
   */
  async function sendVia(
    a: Attempt,
    planned: PlannedHost,
    address: string,
  ): Promise<{ result: SendResult } | { next: Failure } | { skipped: string }> {
    const { dest, plan, refused, failures } = a;
    const host = planned.host.name;
    // A reused connection the server closed meanwhile fails before a byte of the message is sent:
    // that is not the message's fault, so it gets one more try on a fresh connection.
    for (let attempt = 0; ; attempt++) {
      // Looked up each time: a pool left without connections is dropped from the map.
      const p = poolOf(dest.source, planned, address);
      a.progress(`waiting for a connection to ${address}`);
      let c = await acquire(p);
      if (closed) {
        if (c) release(c);
        else free(p);
        return { result: STOPPING };
      }
      if (!c) {
        // While this send waited for a slot, another may have found the address dead.
        const down = hostFailures.get(dest.source, address);
        if (down) {
          free(p);
          return { skipped: down };
        }
        if (!a.planReported) {
          a.planReported = true;
          reportRefused(dest.domain, plan);
        }
        try {
          a.progress(`connecting to ${address}`);
          c = await connectOne(dest, planned, address, plan, p);
          hostFailures.clear(dest.source, address);
        } catch (err) {
          free(p);
          const e = err as ConnectError;
          if (isDeadHost(e)) {
            hostFailures.set(dest.source, address, e.message);
            opts.log.warn(
              { mx: host, ip: address, source: dest.source, error: e.message, skipMs: failureTtlMs },
              'MX address did not answer; skipped for a while',
            );
          }
          const transport: Transport = { ...(e.transport ?? a.base), ...refused };
          for (const f of transport.tlsFailures ?? []) if (!failures.includes(f)) failures.push(f);
          if (failures.length) transport.tlsFailures = [...failures];
          const reply = e.code === 'ETLSPOLICY' ? null : replyOf(e);
          return {
            next: reply
              ? { kind: 'reply', host, reply, transport }
              : { kind: 'connection', host, error: `${address}: ${e.message}`, transport },
          };
        }
      }
      const transport = transportFor(c, dest.domain, planned, plan, failures, refused);
      // Without a message to send, the session goes back unused.
      const raw = messageOf(a);
      if (typeof raw === 'string') {
        release(c);
        return { result: { kind: 'connection', host: c.host, error: raw, transport } };
      }
      const reused = c.messages > 0;
      c.messages++;
      a.progress(`sending to ${address}`);
      const { err, response, rejected } = await transmit(c, a.from, a.rcpts, raw);
      if (!err) {
        release(c);
        const result: SendResult = {
          kind: 'accepted',
          host: c.host,
          reply: response,
          tls: c.tls,
          transport,
          ...(rejected ? { rejected } : {}),
        };
        return { result };
      }
      // The receiver's EHLO SIZE limit (RFC 1870) is checked before MAIL FROM: a permanent refusal of
      // this message, not a connection problem, so it bounces rather than retrying for days.
      if (err.code === 'EMESSAGE' && !err.responseCode && /larger than allowed/i.test(err.message) && c.usable) {
        a.progress(`resetting the session with ${address}`);
        await reset(c);
        release(c);
        const reply = MESSAGE_TOO_BIG.with(`${err.message} (the receiver's SIZE limit)`);
        return { result: { kind: 'reply', host: c.host, reply, transport } };
      }
      const reply = replyOf(err);
      if ((err.code === 'EENVELOPE' || err.code === 'EMESSAGE') && reply && reply.code !== 421 && c.usable) {
        // The server refused this message; the session itself is fine: reset it and keep it.
        a.progress(`resetting the session with ${address}`);
        await reset(c);
        release(c);
        const rejectedToo = a.rcpts.length > 1 ? refusalsOf(err.rejectedErrors) : undefined;
        return {
          result: { kind: 'reply', host: c.host, reply, transport, ...(rejectedToo ? { rejected: rejectedToo } : {}) },
        };
      }
      c.usable = false;
      release(c);
      if (reused && !reply && attempt === 0) continue;
      return {
        result: reply
          ? { kind: 'reply', host: c.host, reply, transport }
          : { kind: 'connection', host: c.host, error: err.message, transport },
      };
    }
  }

  /** Closes idle connections now; busy ones close when their send finishes. */
  async function close(): Promise<void> {
    closed = true;
    for (const p of [...pools.values()]) {
      for (const c of p.idle.splice(0)) {
        if (c.idleTimer) clearTimeout(c.idleTimer);
        c.usable = false;
        c.smtp.quit();
        uncount(p);
      }
    }
    for (const w of waiters.splice(0)) {
      // The waiter holds a slot, which it gives back when it sees `closed`.
      total++;
      perIp.set(w.pool.ip, (perIp.get(w.pool.ip) ?? 0) + 1);
      w.pool.open++;
      w.resolve(null);
    }
  }

  return { send, close };
}

export type Pools = ReturnType<typeof createPools>;
