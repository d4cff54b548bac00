// The development DNS server of `svc dev` (docs/development.md): a dns2 authoritative server on loopback,
// UDP and TCP on one port (a client falls back to TCP on the port it used for UDP, RFC 7766 §5), that asks
// a callback for the records of every question. `svc dev` points SVC_DNS_SERVERS at it. Never used by
// `svc start`.
import net from 'node:net';
import type DNS from 'dns2';
import { Packet, createTCPServer, createUDPServer, type TCPServer, type UDPServer } from 'dns2';

export type DevRecord =
  | { type: 'A'; address: string }
  | { type: 'AAAA'; address: string }
  | { type: 'MX'; priority: number; exchange: string }
  | { type: 'TXT'; value: string }
  | { type: 'CNAME'; domain: string };

/** The records of (name, type); `exists: false` without records is NXDOMAIN, else NODATA. */
export type DevAnswer = { records: DevRecord[]; exists: boolean } | 'servfail';

export type DevLookup = (name: string, type: string) => Promise<DevAnswer>;

export interface DevZone {
  port: number;
  /** '127.0.0.1:<port>', ready for SVC_DNS_SERVERS. */
  hostPort: string;
  stop(): Promise<void>;
}

/** Records change as the developer claims domains: answers are cached briefly (seconds). */
const TTL_S = 5;
const RCODE = { NOERROR: 0, FORMERR: 1, SERVFAIL: 2, NXDOMAIN: 3 } as const;
/** RFC 2308 §4: negative answers carry an SOA whose minimum bounds their caching. */
const SOA = {
  name: 'localhost',
  primary: 'localhost',
  admin: 'hostmaster.localhost',
  serial: 1,
  refresh: 3600,
  retry: 600,
  expiration: 86400,
  minimum: TTL_S,
};

/** RFC 1035 §3.3.14: a TXT record is character-strings of at most 255 octets each (a DKIM key is longer). */
function characterStrings(value: string): Buffer[] {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length === 0) return [bytes];
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += 255) out.push(bytes.subarray(i, i + 255));
  return out;
}

function typeName(code: number): string {
  for (const [name, value] of Object.entries(Packet.TYPE)) if (value === code) return name;
  return `TYPE${code}`;
}

function resource(name: string, r: DevRecord): DNS.Packet.Resource {
  const base = { name, type: Packet.TYPE[r.type], class: Packet.CLASS.IN, ttl: TTL_S };
  switch (r.type) {
    case 'TXT':
      return { ...base, data: characterStrings(r.value) } as unknown as DNS.Packet.Resource;
    case 'MX':
      return { ...base, priority: r.priority, exchange: r.exchange } as unknown as DNS.Packet.Resource;
    case 'CNAME':
      return { ...base, domain: r.domain } as unknown as DNS.Packet.Resource;
    default:
      return { ...base, address: r.address } as unknown as DNS.Packet.Resource;
  }
}

export async function startDevZone(opts: { host: string; port: number; lookup: DevLookup }): Promise<DevZone> {
  async function answer(request: Packet): Promise<Packet> {
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    const question = request.questions[0];
    if (!question) {
      response.header.rcode = RCODE.FORMERR;
      return response;
    }
    let found: DevAnswer;
    try {
      found = await opts.lookup(question.name, typeName(question.type));
    } catch {
      found = 'servfail';
    }
    if (found === 'servfail') {
      response.header.rcode = RCODE.SERVFAIL;
      return response;
    }
    for (const r of found.records) response.answers.push(resource(question.name, r));
    if (!found.records.length) {
      if (!found.exists) response.header.rcode = RCODE.NXDOMAIN;
      const { name, ...soa } = SOA;
      response.authorities.push({
        name,
        type: Packet.TYPE.SOA,
        class: Packet.CLASS.IN,
        ttl: TTL_S,
        ...soa,
      } as unknown as DNS.Packet.Resource);
    }
    return response;
  }

  const tcp: TCPServer = createTCPServer();
  const sockets = new Set<net.Socket>();
  tcp.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  tcp.on('request', (request, send) => {
    void answer(request).then((r) => Promise.resolve(send(r)).catch(() => undefined));
  });
  tcp.on('requestError', () => undefined);
  const makeUdp = (): UDPServer => {
    const udp = createUDPServer();
    udp.on('request', (request, send) => {
      void answer(request).then((r) => send(r).catch(() => undefined));
    });
    udp.on('requestError', () => undefined);
    return udp;
  };
  const { udp, port } = await bindBoth(tcp, makeUdp, opts.host, opts.port);
  return {
    port,
    hostPort: `${opts.host.includes(':') ? `[${opts.host}]` : opts.host}:${port}`,
    async stop() {
      for (const s of sockets) s.destroy();
      await Promise.all([
        new Promise<void>((resolve) => udp.close(() => resolve())),
        new Promise<void>((resolve) => tcp.close(() => resolve())),
      ]);
    },
  };
}

/**
 * UDP and TCP on one port number, since a client falls back to TCP on the port it used for UDP. With port 0
 * the kernel picks a free TCP port; if that number is taken for UDP, try again with another.
 */
export async function bindBoth(
  tcp: TCPServer,
  makeUdp: () => UDPServer,
  host: string,
  wanted: number,
): Promise<{ udp: UDPServer; port: number }> {
  for (let tries = 1; ; tries++) {
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(wanted, host, () => {
        tcp.off('error', reject);
        resolve();
      });
    });
    const port = (tcp.address() as net.AddressInfo).port;
    const udp = makeUdp();
    try {
      await new Promise<void>((resolve, reject) => {
        udp.once('error', reject);
        udp.bind(port, host, () => {
          udp.off('error', reject);
          resolve();
        });
      });
      udp.on('error', () => undefined);
      return { udp, port };
    } catch (err) {
      udp.removeAllListeners();
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
      if (wanted !== 0 || tries >= 20) throw err;
    }
  }
}
