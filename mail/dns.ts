// The dns2-backed Resolver (mta/resolver.ts): a stub resolver that asks the recursive servers of
// SVC_DNS_SERVERS (or the system's), caches by TTL on the injected clock, and always settles.
//
// One lookup is at most two attempts (the first server, then the next one or the same again), each
// bounded by timeoutMs including its TCP leg, so every call settles within about 2 × timeoutMs.
import net from 'node:net';
import dgram from 'node:dgram';
import { getServers } from 'node:dns';
import { randomInt } from 'node:crypto';
import { domainToASCII } from 'node:url';
import type DNS from 'dns2';
import { Packet } from 'dns2';
import type { Clock } from './clock.js';
import { parseHostPort, type HostPort } from './host-port.js';
import { DnsError, type MxRecord, type Resolver, type TlsaRecord } from './resolver.js';

export interface ResolverOptions {
  /** SVC_DNS_SERVERS; empty means the system's resolvers. */
  servers: HostPort[];
  clock: Clock;
  /** Per-attempt timeout. */
  timeoutMs?: number;
}

type Rr = DNS.Packet.Resource;
type QueryType = 'TXT' | 'MX' | 'A' | 'AAAA' | 'CNAME' | 'PTR' | 'TLSA';

/** RFC 6698 §7.1: TLSA is type 52, which dns2 has no name for (its records come back as raw `data`). */
const TYPE_CODE: Record<QueryType, number> = {
  TXT: Packet.TYPE.TXT,
  MX: Packet.TYPE.MX,
  A: Packet.TYPE.A,
  AAAA: Packet.TYPE.AAAA,
  CNAME: Packet.TYPE.CNAME,
  PTR: Packet.TYPE.PTR,
  TLSA: 52,
};

const DEFAULT_TIMEOUT_MS = 2000;
/** A positive answer is kept for its TTL, but never longer than this (a changed record shows within the hour). */
const MAX_POSITIVE_TTL_S = 3600;
/**
 * A negative answer is kept for at most this long, whatever the SOA says, and this long when there is
 * no SOA to go by: a customer who has just published a record must not wait out a day-long SOA minimum.
 */
const MAX_NEGATIVE_TTL_S = 60;
/** Longest CNAME chain followed within one answer (loops and absurd chains end as NODATA). */
const MAX_CNAME_HOPS = 8;
/** The cache forgets its oldest entries beyond this many. */
const MAX_CACHE_ENTRIES = 10_000;

const RCODE_NOERROR = 0;
const RCODE_NXDOMAIN = 3;

/** What one response says about (name, type); decided by `interpret`, without I/O. */
export type Outcome =
  /** authenticated: the AD bit of the answer (RFC 4035 §3.2.3), set by a validating resolver. */
  | { kind: 'records'; records: Rr[]; ttlS: number; authenticated: boolean }
  | { kind: 'absent'; failure: 'NXDOMAIN' | 'NODATA'; ttlS: number; authenticated: boolean }
  | { kind: 'failed'; failure: 'SERVFAIL' };

const normalize = (name: string): string => {
  const trimmed = name.trim().replace(/\.$/, '');
  // dns2 writes labels byte by byte from char codes, so a U-label must become its A-label first
  // (RFC 5891 §4.4); plain ASCII names are left as they are (underscore labels included).
  const ascii = /[^\x00-\x7f]/.test(trimmed) ? domainToASCII(trimmed) : trimmed;
  return ascii.toLowerCase();
};

const sameName = (a: string, b: string) => normalize(a) === normalize(b);

/** RFC 1035 §2.3.4: labels of 1 to 63 octets, 255 octets on the wire (253 as text). */
function validName(name: string): boolean {
  if (name === '') return true;
  if (name.length > 253) return false;
  return name.split('.').every((label) => label.length >= 1 && label.length <= 63);
}

/**
 * RFC 2308 §5: a negative answer is cached for the lesser of the SOA record's TTL and its MINIMUM
 * field; capped at MAX_NEGATIVE_TTL_S, which is also the value without an SOA.
 */
export function negativeTtlS(authorities: Rr[]): number {
  const soa = authorities.find((r) => r.type === Packet.TYPE.SOA);
  if (!soa) return MAX_NEGATIVE_TTL_S;
  return Math.min(soa.ttl, soa.minimum ?? soa.ttl, MAX_NEGATIVE_TTL_S);
}

/** Reads a response to a query for (name, type). */
export function interpret(response: DNS.Packet, name: string, type: QueryType): Outcome {
  const rcode = response.header.rcode;
  // SERVFAIL, REFUSED, FORMERR, NOTIMP…: the server answered but not about the name.
  if (rcode !== RCODE_NOERROR && rcode !== RCODE_NXDOMAIN) return { kind: 'failed', failure: 'SERVFAIL' };
  const qtype = TYPE_CODE[type];
  const authenticated = (response.header as { ad?: number }).ad === 1;
  // RFC 1034 §3.6.2 / §4.3.2: the answer may start with a CNAME chain, the records being owned by its
  // last name. RFC 6604: the rcode then speaks of that last name, hence NXDOMAIN through a CNAME.
  let owner = name;
  let ttlS = Infinity;
  for (let hop = 0; hop <= MAX_CNAME_HOPS; hop++) {
    const found = response.answers.filter((r) => r.type === qtype && sameName(r.name, owner));
    if (found.length) {
      for (const r of found) ttlS = Math.min(ttlS, r.ttl);
      return { kind: 'records', records: found, ttlS, authenticated };
    }
    const alias = response.answers.find((r) => r.type === Packet.TYPE.CNAME && sameName(r.name, owner));
    if (!alias?.domain) break;
    ttlS = Math.min(ttlS, alias.ttl);
    owner = alias.domain;
  }
  const failure = rcode === RCODE_NXDOMAIN ? 'NXDOMAIN' : 'NODATA';
  return { kind: 'absent', failure, ttlS: negativeTtlS(response.authorities), authenticated };
}

/** How long an outcome may be served from the cache, in ms; 0 means not at all. */
export function cacheMs(outcome: Outcome): number {
  switch (outcome.kind) {
    case 'records':
      return Math.max(0, Math.min(outcome.ttlS, MAX_POSITIVE_TTL_S)) * 1000;
    case 'absent':
      return Math.max(0, Math.min(outcome.ttlS, MAX_NEGATIVE_TTL_S)) * 1000;
    case 'failed':
      // A failure says nothing about the records; the next lookup asks again.
      return 0;
  }
}

/** The system's resolvers, as node:dns reads them from resolv.conf, on port 53 unless it says otherwise. */
function systemServers(): HostPort[] {
  const servers = getServers()
    .map((s) => parseHostPort(s, 53))
    .filter((s): s is HostPort => s !== null);
  // resolv.conf(5): with no nameserver line the local machine's is used.
  return servers.length ? servers : [{ host: '127.0.0.1', port: 53 }];
}

/**
 * The query for (name, type): recursion desired, and AD set, which asks a validating resolver to say
 * whether the answer is DNSSEC-authenticated (RFC 6840 §5.7) without the cost of DO and signatures.
 */
function queryOf(name: string, type: QueryType): DNS.Packet {
  const query = new Packet();
  query.header.id = randomInt(0x10000);
  query.header.rd = 1;
  (query.header as { ad?: number }).ad = 1;
  query.questions.push({ name, type: TYPE_CODE[type], class: Packet.CLASS.IN } as DNS.Packet.Question);
  return query;
}

/** A query over UDP (RFC 1035 §4.2.1), abandoned at the deadline; only the server's answer with our ID counts. */
function queryUdp(server: HostPort, name: string, type: QueryType, timeoutMs: number): Promise<DNS.Packet> {
  const query = queryOf(name, type);
  const socket = dgram.createSocket(net.isIP(server.host) === 6 ? 'udp6' : 'udp4');
  return new Promise((resolve, reject) => {
    let settled = false;
    const finish = (err: Error | null, packet?: DNS.Packet) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.close();
      if (err) reject(err);
      else resolve(packet as DNS.Packet);
    };
    const timer = setTimeout(() => finish(new Error(`DNS query timed out after ${timeoutMs} ms`)), timeoutMs);
    socket.on('error', (err) => finish(err));
    socket.on('message', (message, rinfo) => {
      // RFC 5452 §9.1: an answer from elsewhere, or with another ID, is not ours: keep waiting.
      if (rinfo.port !== server.port || (net.isIP(server.host) && rinfo.address !== server.host)) return;
      let packet: DNS.Packet;
      try {
        packet = Packet.parse(message);
      } catch {
        return;
      }
      if (packet.header.id === query.header.id) finish(null, packet);
    });
    socket.send(query.toBuffer(), server.port, server.host, (err) => err && finish(err));
  });
}

/** A query over TCP (RFC 1035 §4.2.2: two-octet length prefix), abandoned at the deadline. */
function queryTcp(server: HostPort, name: string, type: QueryType, timeoutMs: number): Promise<DNS.Packet> {
  const query = queryOf(name, type);
  const message = query.toBuffer();
  const frame = Buffer.alloc(2 + message.length);
  frame.writeUInt16BE(message.length, 0);
  message.copy(frame, 2);

  // dns2's own TCP client has no timeout and keeps its socket to itself; this one is destroyed when
  // the attempt ends, whichever way it ends.
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: server.host, port: server.port });
    let received = Buffer.alloc(0);
    let settled = false;
    const finish = (err: Error | null, packet?: DNS.Packet) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err) reject(err);
      else resolve(packet as DNS.Packet);
    };
    const timer = setTimeout(() => finish(new Error(`DNS over TCP timed out after ${timeoutMs} ms`)), timeoutMs);
    socket.on('error', (err) => finish(err));
    socket.on('close', () => finish(new Error('DNS over TCP: connection closed before the answer')));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      if (received.length < 2) return;
      const length = received.readUInt16BE(0);
      if (received.length < 2 + length) return;
      let packet: DNS.Packet;
      try {
        packet = Packet.parse(received.subarray(2, 2 + length));
      } catch (err) {
        return finish(err as Error);
      }
      // RFC 5452 §9.1: an answer is ours only if its ID matches the query's.
      if (packet.header.id !== query.header.id) return finish(new Error('DNS over TCP: answer with another ID'));
      finish(null, packet);
    });
    socket.write(frame);
  });
}

/**
 * One attempt against one server: UDP, then TCP if the answer is truncated (RFC 1035 §4.2.1,
 * RFC 7766 §5), both inside the same timeoutMs. Rejects on timeout, network error or a reply that
 * does not answer the question.
 */
async function attempt(server: HostPort, name: string, type: QueryType, timeoutMs: number): Promise<DNS.Packet> {
  const deadline = Date.now() + timeoutMs;
  let response = await queryUdp(server, name, type, timeoutMs);
  if (response.header.tc) response = await queryTcp(server, name, type, Math.max(1, deadline - Date.now()));
  // RFC 5452 §9.1: the question must come back as asked (case aside); anything else is not an answer.
  const q = response.questions[0];
  if (!q || q.type !== TYPE_CODE[type] || !sameName(q.name, name)) throw new Error('DNS answer to another question');
  return response;
}

export function createResolver(o: ResolverOptions): Resolver {
  const timeoutMs = o.timeoutMs ?? DEFAULT_TIMEOUT_MS;
  const servers = o.servers.length ? o.servers : systemServers();
  const cache = new Map<string, { outcome: Outcome; expiresAt: number }>();
  const inflight = new Map<string, Promise<Outcome>>();

  /**
   * At most two attempts: the first server, then the next one if configured (else the first again).
   * A timeout or network error moves on; so does SERVFAIL/REFUSED when there is another server to
   * ask (the failure may be that server's alone); an answer with NOERROR or NXDOMAIN is final.
   */
  async function ask(name: string, type: QueryType): Promise<Outcome> {
    const order = servers.length > 1 ? servers.slice(0, 2) : [servers[0]!, servers[0]!];
    let failed: Outcome | null = null;
    for (const [i, server] of order.entries()) {
      try {
        const outcome = interpret(await attempt(server, name, type, timeoutMs), name, type);
        if (outcome.kind !== 'failed') return outcome;
        failed = outcome;
        if (order[i + 1] === server) break;
      } catch {
        // Timed out or unreachable: the next attempt decides.
      }
    }
    if (failed) return failed;
    throw new DnsError('TIMEOUT', name, type);
  }

  function remember(key: string, outcome: Outcome): void {
    // A failure says nothing new about the records: an entry still valid for others stays.
    if (outcome.kind === 'failed') return;
    const ms = cacheMs(outcome);
    cache.delete(key);
    if (ms <= 0) return;
    cache.set(key, { outcome, expiresAt: o.clock.now() + ms });
    // Map keeps insertion order, so the first key is the oldest entry.
    if (cache.size > MAX_CACHE_ENTRIES) cache.delete(cache.keys().next().value as string);
  }

  async function lookup(rawName: string, type: QueryType, fresh: boolean): Promise<{ name: string; outcome: Outcome }> {
    const name = normalize(rawName);
    // A name that cannot be encoded cannot exist: no query is sent for it.
    if (!validName(name))
      return { name, outcome: { kind: 'absent', failure: 'NXDOMAIN', ttlS: 0, authenticated: false } };
    const key = `${type} ${name}`;
    if (!fresh) {
      const hit = cache.get(key);
      if (hit && hit.expiresAt > o.clock.now()) return { name, outcome: hit.outcome };
      // Concurrent lookups of one key share one query.
      const pending = inflight.get(key);
      if (pending) return { name, outcome: await pending };
    }
    // A fresh lookup neither joins a query already on its way (it may predate a record just published)
    // nor lets others join it; its answer refreshes the cache all the same.
    const query = ask(name, type).then((outcome) => (remember(key, outcome), outcome));
    if (!fresh) {
      inflight.set(key, query);
      const clear = () => inflight.get(key) === query && inflight.delete(key);
      query.then(clear, clear);
    }
    return { name, outcome: await query };
  }

  /** The records, or the DnsError saying why there are none. */
  async function records(rawName: string, type: QueryType, fresh = false): Promise<Rr[]> {
    const { name, outcome } = await lookup(rawName, type, fresh);
    if (outcome.kind === 'records') return outcome.records;
    throw new DnsError(outcome.failure, name, type);
  }

  const hostName = (s: string | undefined) => (s ?? '').toLowerCase().replace(/\.$/, '');
  const toMx = (rrs: Rr[]): MxRecord[] =>
    rrs
      .map((r) => ({ exchange: hostName(r.exchange), priority: r.priority ?? 0 }))
      // RFC 5321 §5.1: lower preference first; Array.prototype.sort is stable, so ties keep server order.
      .sort((x, y) => x.priority - y.priority);

  return {
    async txt(name, opts) {
      // RFC 7208 §3.3 (and RFC 6376 §3.6.2.2 for DKIM): the strings of one record are one value.
      // dns2 decodes each character-string as UTF-8 into an array (its type also admits a Buffer, for raw data).
      return (await records(name, 'TXT', opts?.fresh)).map((r) =>
        Array.isArray(r.data) ? r.data.join('') : typeof r.data === 'string' ? r.data : '',
      );
    },
    async mx(name, opts) {
      return toMx(await records(name, 'MX', opts?.fresh));
    },
    async mxSecure(name, opts) {
      const { name: n, outcome } = await lookup(name, 'MX', opts?.fresh ?? false);
      if (outcome.kind !== 'records') throw new DnsError(outcome.failure, n, 'MX');
      return { records: toMx(outcome.records), authenticated: outcome.authenticated };
    },
    async tlsa(name, opts) {
      const { outcome } = await lookup(name, 'TLSA', opts?.fresh ?? false);
      if (outcome.kind === 'failed') throw new DnsError(outcome.failure, normalize(name), 'TLSA');
      if (outcome.kind === 'absent') return { records: [], authenticated: outcome.authenticated };
      return { records: outcome.records.flatMap((r) => parseTlsa(r.data)), authenticated: outcome.authenticated };
    },
    async a(name, opts) {
      return (await records(name, 'A', opts?.fresh)).map((r) => r.address ?? '');
    },
    async aaaa(name, opts) {
      return (await records(name, 'AAAA', opts?.fresh)).map((r) => r.address ?? '');
    },
    async ptr(name, opts) {
      return (await records(name, 'PTR', opts?.fresh)).map((r) => hostName(r.domain));
    },
    async cname(name, opts) {
      try {
        const [first] = await records(name, 'CNAME', opts?.fresh);
        return first ? hostName(first.domain) : null;
      } catch (err) {
        if (err instanceof DnsError && err.absent) return null;
        throw err;
      }
    },
  };
}

/** RFC 6698 §2.1: usage, selector, matching type (one octet each), then the association data. */
function parseTlsa(data: unknown): TlsaRecord[] {
  if (!Buffer.isBuffer(data) || data.length < 4) return [];
  return [{ usage: data[0]!, selector: data[1]!, matchingType: data[2]!, data: Buffer.from(data.subarray(3)) }];
}
