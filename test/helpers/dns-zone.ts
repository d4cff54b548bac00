// A real dns2 authoritative server on 127.0.0.1 (UDP and TCP on the same port, as a resolver expects
// for the RFC 7766 fallback) answering from a mutable zone the test edits while it runs. It logs every
// query it receives, and can be made silent, failing or truncating to drive the resolver's error paths.
//
//   const zone = await startDnsZone(t);          // stopped in t.teardown
//   zone.txt('_svc-verify.example.test', token);
//   svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort } });
import net from 'node:net';
import type DNS from 'dns2';
import { Packet, createTCPServer, createUDPServer, type TCPServer, type UDPServer } from 'dns2';
// UDP and TCP on one port number (a client falls back to TCP on the port it used for UDP), as the dev zone binds.
import { bindBoth } from '../../dev/zone.js';

export type ZoneType = 'A' | 'AAAA' | 'MX' | 'TXT' | 'CNAME' | 'NS' | 'SOA' | 'TLSA' | 'PTR';

/**
 * normal: answer from the zone. silent: never answer (the client must time out). servfail / refused:
 * answer every query with that rcode. truncate: over UDP answer with the TC bit and no records, so the
 * client must ask again over TCP (RFC 1035 §4.2.1), where the answer is normal.
 */
export type ZoneBehaviour = 'normal' | 'silent' | 'servfail' | 'refused' | 'truncate';

export interface ZoneQuery {
  /** The name as it came over the wire (not normalized, so tests can check the client's). */
  name: string;
  type: string;
  transport: 'udp' | 'tcp';
}

export interface SoaOptions {
  /** RFC 2308 §4: the negative-caching TTL of the zone, in seconds. */
  minimum?: number;
  /** TTL of the SOA record itself; RFC 2308 §5 caches a negative answer for min(ttl, minimum). */
  ttl?: number;
}

export interface DnsZone {
  readonly host: string;
  readonly port: number;
  /** '127.0.0.1:<port>', ready for SVC_DNS_SERVERS. */
  readonly hostPort: string;
  behaviour: ZoneBehaviour;
  /** TTL in seconds given to records published from now on (default 300). */
  ttl: number;
  /**
   * Answer as a validating resolver would for a signed zone: the AD bit set on every answer (RFC 4035
   * §3.2.3), which the MTA takes as DNSSEC-authenticated for DANE. Default false (an unsigned zone).
   */
  dnssec: boolean;
  /** Every query received, oldest first; tests may empty it (`zone.queries.length = 0`). */
  readonly queries: ZoneQuery[];
  /** Queries received for `name` (case-insensitive), optionally of one type. */
  queriesFor(name: string, type?: string): ZoneQuery[];

  a(name: string, address: string): DnsZone;
  aaaa(name: string, address: string): DnsZone;
  /** One MX record; `exchange` '.' (or '') publishes a null MX (RFC 7505). */
  mx(name: string, priority: number, exchange: string): DnsZone;
  /**
   * One TXT record made of these strings. Each string longer than 255 bytes is split into several
   * character-strings (RFC 1035 §3.3.14), as a zone file or a DNS provider does with a DKIM key.
   */
  txt(name: string, ...strings: string[]): DnsZone;
  cname(name: string, target: string): DnsZone;
  /** One TLSA record (RFC 6698 §2.1), e.g. tlsa('_25._tcp.mx.example.test', 3, 1, 1, sha256OfSpki). */
  tlsa(name: string, usage: number, selector: number, matchingType: number, data: Buffer): DnsZone;
  ns(name: string, host: string): DnsZone;
  /**
   * One PTR record at the reverse name of `address` (RFC 1035 §3.5 in-addr.arpa, RFC 3596 §2.5 ip6.arpa):
   * ptr('127.0.0.2', 'mta-b.test') publishes 2.0.0.127.in-addr.arpa PTR mta-b.test.
   */
  ptr(address: string, host: string): DnsZone;
  /** The SOA at `name`; negative answers carry the SOA of the closest enclosing name that has one. */
  soa(name: string, o?: SoaOptions): DnsZone;
  /** Removes every record of `name`, or only those of `type`. The root SOA is removed with remove('', 'SOA'). */
  remove(name: string, type?: ZoneType): DnsZone;

  stop(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

type Rdata =
  | { type: 'A' | 'AAAA'; address: string }
  | { type: 'MX'; priority: number; exchange: string }
  | { type: 'TXT'; data: Buffer[] }
  | { type: 'CNAME'; domain: string }
  | { type: 'PTR'; domain: string }
  | { type: 'TLSA'; data: Buffer }
  | { type: 'NS'; ns: string }
  | {
      type: 'SOA';
      primary: string;
      admin: string;
      serial: number;
      refresh: number;
      retry: number;
      expiration: number;
      minimum: number;
    };

type ZoneRecord = Rdata & { ttl: number };

const norm = (name: string) => name.toLowerCase().replace(/\.$/, '');

/** RFC 1035 §3.3: a <character-string> is one length octet and at most 255 octets of data. */
function characterStrings(value: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length === 0) return [bytes];
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) out.push(bytes.subarray(i, i + 255));
  return out;
}

const DEFAULT_SOA = {
  primary: 'ns.zone.test',
  admin: 'hostmaster.zone.test',
  serial: 1,
  refresh: 3600,
  retry: 600,
  expiration: 86400,
};

export async function startDnsZone(t?: Teardown): Promise<DnsZone> {
  const records = new Map<string, ZoneRecord[]>();
  const queries: ZoneQuery[] = [];

  const publish = (name: string, rdata: Rdata, ttl = zone.ttl): void => {
    const key = norm(name);
    const list = records.get(key) ?? [];
    const record = { ...rdata, ttl } as ZoneRecord;
    // RFC 2181 §5: an RRset holds no duplicate records; publishing the same record twice is one record.
    if (!list.some((r) => sameRdata(r, record))) list.push(record);
    records.set(key, list);
  };

  // RFC 8020: a name exists if it owns records or has a descendant that does (an empty non-terminal).
  const exists = (name: string): boolean => {
    if (records.get(name)?.length) return true;
    const suffix = `.${name}`;
    for (const [owner, list] of records) if (list.length && name !== '' && owner.endsWith(suffix)) return true;
    return false;
  };

  const closestSoa = (name: string): { owner: string; record: ZoneRecord } | null => {
    const labels = name === '' ? [] : name.split('.');
    for (let i = 0; i <= labels.length; i++) {
      const owner = labels.slice(i).join('.');
      const soa = records.get(owner)?.find((r) => r.type === 'SOA');
      if (soa) return { owner, record: soa };
    }
    return null;
  };

  function answer(request: Packet, transport: 'udp' | 'tcp'): Packet | null {
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    (response.header as { ad?: number }).ad = zone.dnssec ? 1 : 0;
    const question = request.questions[0];
    if (!question) {
      response.header.rcode = RCODE.FORMERR;
      return response;
    }
    const type = typeName(question.type);
    queries.push({ name: question.name, type, transport });
    switch (zone.behaviour) {
      case 'silent':
        return null;
      case 'servfail':
        response.header.rcode = RCODE.SERVFAIL;
        return response;
      case 'refused':
        response.header.rcode = RCODE.REFUSED;
        return response;
      case 'truncate':
        if (transport === 'udp') {
          response.header.tc = 1;
          return response;
        }
        break;
      case 'normal':
        break;
    }
    // RFC 1034 §4.3.2 step 3: follow CNAMEs inside the zone, putting each one in the answer, then the
    // records of the asked type at the end of the chain. A query for the CNAME type itself stops at once.
    let owner = norm(question.name);
    let wire = question.name;
    for (let hop = 0; hop < 8; hop++) {
      const here = records.get(owner) ?? [];
      const matching = here.filter((r) => r.type === type);
      if (matching.length) {
        for (const r of matching) response.answers.push(resource(wire, r));
        return response;
      }
      const alias = type === 'CNAME' ? undefined : here.find((r) => r.type === 'CNAME');
      if (!alias || alias.type !== 'CNAME') break;
      response.answers.push(resource(wire, alias));
      owner = norm(alias.domain);
      wire = alias.domain;
    }
    // RFC 2308 §2.1 / §2.2 (and RFC 6604 for the rcode at the end of a chain): NXDOMAIN when the name
    // does not exist, NODATA (NOERROR, no answer) when it does; both with the SOA in authority (§3).
    if (!exists(owner)) response.header.rcode = RCODE.NXDOMAIN;
    const soa = closestSoa(owner);
    if (soa) response.authorities.push(resource(soa.owner, soa.record));
    return response;
  }

  const tcp: TCPServer = createTCPServer();
  const sockets = new Set<net.Socket>();
  tcp.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  tcp.on('request', (request, send) => {
    const response = answer(request, 'tcp');
    // dns2's TCP send is synchronous and returns nothing; Promise.resolve covers both shapes.
    if (response) Promise.resolve(send(response)).catch(() => undefined);
  });
  // A malformed query is the client's problem; the server stays up.
  tcp.on('requestError', () => undefined);
  const makeUdp = (): UDPServer => {
    const udp = createUDPServer();
    udp.on('request', (request, send) => {
      const response = answer(request, 'udp');
      if (response) send(response).catch(() => undefined);
    });
    udp.on('requestError', () => undefined);
    return udp;
  };

  const host = '127.0.0.1';
  const { udp, port } = await bindBoth(tcp, makeUdp, host, 0);

  const zone: DnsZone = {
    host,
    port,
    hostPort: `${host}:${port}`,
    behaviour: 'normal',
    ttl: 300,
    dnssec: false,
    queries,
    queriesFor: (name, type) =>
      queries.filter((q) => norm(q.name) === norm(name) && (type === undefined || q.type === type)),
    a: (name, address) => (publish(name, { type: 'A', address }), zone),
    aaaa: (name, address) => (publish(name, { type: 'AAAA', address }), zone),
    mx: (name, priority, exchange) => (publish(name, { type: 'MX', priority, exchange: norm(exchange) }), zone),
    // RFC 1035 §3.3.14: a TXT record holds at least one character-string, hence '' for txt(name).
    txt: (name, ...strings) => (
      publish(name, { type: 'TXT', data: (strings.length ? strings : ['']).flatMap(characterStrings) }),
      zone
    ),
    cname: (name, target) => (publish(name, { type: 'CNAME', domain: norm(target) }), zone),
    tlsa: (name, usage, selector, matchingType, data) => (
      publish(name, { type: 'TLSA', data: Buffer.concat([Buffer.from([usage, selector, matchingType]), data]) }),
      zone
    ),
    ns: (name, nsHost) => (publish(name, { type: 'NS', ns: norm(nsHost) }), zone),
    ptr: (address, host) => (publish(reverseName(address), { type: 'PTR', domain: norm(host) }), zone),
    soa(name, o = {}) {
      zone.remove(name, 'SOA');
      publish(name, { type: 'SOA', ...DEFAULT_SOA, minimum: o.minimum ?? 300 }, o.ttl ?? zone.ttl);
      return zone;
    },
    remove(name, type) {
      const key = norm(name);
      const kept = type ? (records.get(key) ?? []).filter((r) => r.type !== type) : [];
      if (kept.length) records.set(key, kept);
      else records.delete(key);
      return zone;
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await Promise.all([
        new Promise<void>((resolve) => udp.close(() => resolve())),
        new Promise<void>((resolve) => tcp.close(() => resolve())),
      ]);
    },
  };
  // Negative answers carry an SOA from the start (minimum 300 s, longer than the resolver's 60 s cap);
  // remove('', 'SOA') to test answers without one.
  zone.soa('');
  t?.teardown(() => zone.stop());
  return zone;
}

const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3, REFUSED: 5 } as const;

/** RFC 6698 §7.1; dns2 has no name for it, and carries its rdata as raw `data` both ways. */
const TLSA = 52;

function typeName(code: number): string {
  if (code === TLSA) return 'TLSA';
  for (const [name, value] of Object.entries(Packet.TYPE)) if (value === code) return name;
  return `TYPE${code}`;
}

function resource(name: string, r: ZoneRecord): DNS.Packet.Resource {
  const code = r.type === 'TLSA' ? TLSA : Packet.TYPE[r.type];
  const base = { name, type: code, class: Packet.CLASS.IN, ttl: r.ttl };
  const rdata = r.type === 'TXT' || r.type === 'TLSA' ? { data: r.data } : stripType(r);
  return { ...base, ...rdata } as unknown as DNS.Packet.Resource;
}

/** The owner name of an address's PTR record: in-addr.arpa (RFC 1035 §3.5) or ip6.arpa nibbles (RFC 3596 §2.5). */
export function reverseName(address: string): string {
  if (net.isIPv4(address)) return `${address.split('.').reverse().join('.')}.in-addr.arpa`;
  if (!net.isIPv6(address)) throw new Error(`not an IP address: ${address}`);
  const [head = '', tail = ''] = address.split('::');
  const groups = (s: string) => (s ? s.split(':') : []);
  const h = groups(head);
  const tl = groups(tail);
  const all = address.includes('::') ? [...h, ...Array(8 - h.length - tl.length).fill('0'), ...tl] : h;
  const nibbles = all.map((g) => g.padStart(4, '0')).join('');
  return `${[...nibbles.toLowerCase()].reverse().join('.')}.ip6.arpa`;
}

function stripType(r: ZoneRecord): Record<string, unknown> {
  const { type: _type, ttl: _ttl, ...rest } = r;
  return rest;
}

function sameRdata(a: ZoneRecord, b: ZoneRecord): boolean {
  if (a.type !== b.type) return false;
  if (a.type === 'TLSA' && b.type === 'TLSA') return a.data.equals(b.data);
  if (a.type === 'TXT' && b.type === 'TXT')
    return Buffer.concat(a.data).equals(Buffer.concat(b.data)) && a.data.length === b.data.length;
  return JSON.stringify(stripType(a)) === JSON.stringify(stripType(b));
}
