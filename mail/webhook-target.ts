// Where a webhook may be sent (issue 6 item 1): http or https URLs whose addresses are on the public
// internet, so that a customer cannot aim the service at its own network (loopback, private ranges,
// cloud metadata at 169.254.169.254, …). SVC_ALLOW_PRIVATE_WEBHOOKS=1 lifts the address rule (tests,
// closed networks).
//
// The rule is applied twice: to the URL at registration (an IP literal, or a name that can only be
// local), and to the addresses the host resolves to at every delivery, through ctx.resolver. The
// delivery then connects to the very address it checked, never resolving the name again, so a DNS
// answer that changes between the check and the connection (rebinding) cannot reach an internal host.
import net from 'node:net';
import { DnsError, type Resolver } from './resolver.js';

/** Why an address is refused; null when it is a public unicast address. */
export type Refusal =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'shared (CGNAT)'
  | 'link-local'
  | 'unique local'
  | 'multicast'
  | 'reserved'
  | 'documentation'
  | 'benchmarking'
  | 'tunnel';

interface Range {
  bytes: number[];
  bits: number;
  why: Refusal;
}

const v4 = (cidr: string, why: Refusal): Range => {
  const [a, bits] = cidr.split('/') as [string, string];
  return { bytes: a.split('.').map(Number), bits: Number(bits), why };
};
const v6 = (cidr: string, why: Refusal): Range => {
  const [a, bits] = cidr.split('/') as [string, string];
  return { bytes: parseV6(a)!, bits: Number(bits), why };
};

// IANA IPv4 Special-Purpose Address Registry (RFC 6890 and successors); first match wins.
const V4: Range[] = [
  v4('0.0.0.0/8', 'unspecified'), // RFC 791 "this network"; 0.0.0.0 reaches the local host on Linux
  v4('10.0.0.0/8', 'private'), // RFC 1918
  v4('100.64.0.0/10', 'shared (CGNAT)'), // RFC 6598
  v4('127.0.0.0/8', 'loopback'), // RFC 1122 §3.2.1.3
  v4('169.254.0.0/16', 'link-local'), // RFC 3927 (cloud metadata services live here)
  v4('172.16.0.0/12', 'private'), // RFC 1918
  v4('192.0.0.0/24', 'reserved'), // RFC 6890 IETF protocol assignments
  v4('192.0.2.0/24', 'documentation'), // RFC 5737
  v4('192.88.99.0/24', 'reserved'), // RFC 7526 deprecated 6to4 relay anycast
  v4('192.168.0.0/16', 'private'), // RFC 1918
  v4('198.18.0.0/15', 'benchmarking'), // RFC 2544
  v4('198.51.100.0/24', 'documentation'), // RFC 5737
  v4('203.0.113.0/24', 'documentation'), // RFC 5737
  v4('224.0.0.0/4', 'multicast'), // RFC 5771
  v4('240.0.0.0/4', 'reserved'), // RFC 1112 §4, and the broadcast address 255.255.255.255
];

// IANA IPv6 Special-Purpose Address Registry. Addresses that embed an IPv4 address (mapped, NAT64,
// 6to4) are judged by that address instead (see refusalOf).
const V6: Range[] = [
  v6('::/128', 'unspecified'), // RFC 4291 §2.5.2
  v6('::1/128', 'loopback'), // RFC 4291 §2.5.3
  v6('::/8', 'reserved'), // IPv4-compatible (deprecated, RFC 4291 §2.5.5.1) and the rest of 0000::/8
  v6('64:ff9b:1::/48', 'private'), // RFC 8215 local-use NAT64
  v6('100::/64', 'reserved'), // RFC 6666 discard-only
  // Teredo (RFC 4380 §2.14): the relay that answers is anyone's, and the client's IPv4 address sits
  // obfuscated in the last 32 bits; nothing a webhook should go to.
  v6('2001::/32', 'tunnel'),
  v6('2001:2::/48', 'benchmarking'), // RFC 5180
  v6('2001:10::/28', 'reserved'), // RFC 4843 deprecated ORCHID
  v6('2001:db8::/32', 'documentation'), // RFC 3849
  v6('3fff::/20', 'documentation'), // RFC 9637
  v6('5f00::/16', 'reserved'), // RFC 9602 SRv6 SIDs, not globally reachable
  v6('fc00::/7', 'unique local'), // RFC 4193
  v6('fe80::/10', 'link-local'), // RFC 4291 §2.5.6
  v6('fec0::/10', 'private'), // RFC 3879 deprecated site-local
  v6('ff00::/8', 'multicast'), // RFC 4291 §2.7
];

function parseV4(s: string): number[] | null {
  if (!net.isIPv4(s)) return null;
  return s.split('.').map(Number);
}

/** 16 bytes of an IPv6 address (an IPv4 tail written dotted included), or null. */
function parseV6(s: string): number[] | null {
  if (!net.isIPv6(s)) return null;
  // A dotted IPv4 tail (RFC 4291 §2.2 form 3) is the last two groups.
  const text = s
    .replace(/%.*$/, '')
    .replace(
      /(\d+)\.(\d+)\.(\d+)\.(\d+)$/,
      (_, a: string, b: string, c: string, d: string) =>
        `${((Number(a) << 8) | Number(b)).toString(16)}:${((Number(c) << 8) | Number(d)).toString(16)}`,
    );
  const [head = '', rest] = text.split('::') as [string, string | undefined];
  const groups = (g: string) => (g === '' ? [] : g.split(':').map((x) => parseInt(x, 16)));
  const h = groups(head);
  const r = rest === undefined ? [] : groups(rest);
  const all = rest === undefined ? h : [...h, ...Array<number>(8 - h.length - r.length).fill(0), ...r];
  if (all.length !== 8) return null;
  return all.flatMap((g) => [g >> 8, g & 0xff]);
}

function inRange(bytes: number[], r: Range): boolean {
  let bits = r.bits;
  for (let i = 0; bits > 0; i++, bits -= 8) {
    const mask = bits >= 8 ? 0xff : (0xff << (8 - bits)) & 0xff;
    if (((bytes[i] ?? 0) & mask) !== ((r.bytes[i] ?? 0) & mask)) return false;
  }
  return true;
}

const isPrefix = (bytes: number[], prefix: number[]) => prefix.every((b, i) => bytes[i] === b);

/** Why this IP address may not receive webhooks, or null when it is public; throws for a non-address. */
export function refusalOf(address: string): Refusal | null {
  const a4 = parseV4(address);
  if (a4) return V4.find((r) => inRange(a4, r))?.why ?? null;
  const a6 = parseV6(address);
  if (!a6) throw new Error(`${JSON.stringify(address)} is not an IP address`);
  // Addresses carrying an IPv4 address reach that address: judge it instead.
  // ::ffff:0:0/96, RFC 4291 §2.5.5.2
  if (isPrefix(a6, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff])) return refusalOf(a6.slice(12).join('.'));
  // 64:ff9b::/96, RFC 6052
  if (isPrefix(a6, [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0])) return refusalOf(a6.slice(12).join('.'));
  if (isPrefix(a6, [0x20, 0x02])) return refusalOf(a6.slice(2, 6).join('.')); // 2002::/16 6to4, RFC 3056
  return V6.find((r) => inRange(a6, r))?.why ?? null;
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; message: string };

/** The URL's host as an IP address (IPv6 without its brackets), or null for a name. */
export function literalAddress(url: URL): string | null {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return net.isIP(host) ? host : null;
}

/**
 * Registration: the URL is absolute http(s), carries no credentials, and (unless private targets
 * are allowed) is neither an IP literal outside the public internet nor a name that can only be
 * local (RFC 6761 §6.3: localhost and *.localhost). Names are resolved and checked at delivery.
 */
export function checkWebhookUrl(raw: string, allowPrivate: boolean): UrlCheck {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: 'url is not an absolute URL.' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    return { ok: false, message: 'url must be http or https.' };
  // A password in the URL would be stored and listed in clear: the signature authenticates us instead.
  if (url.username || url.password)
    return {
      ok: false,
      message: 'url must not carry a user name or password; verify the webhook-signature header instead.',
    };
  if (allowPrivate) return { ok: true, url };
  const address = literalAddress(url);
  if (address) {
    const why = refusalOf(address);
    if (why)
      return {
        ok: false,
        message: `url points at ${address} (${why}); webhooks go to public internet addresses only.`,
      };
  } else {
    const host = url.hostname.replace(/\.$/, '').toLowerCase();
    if (host === 'localhost' || host.endsWith('.localhost'))
      return { ok: false, message: `url points at ${host} (loopback); webhooks go to public internet addresses only.` };
  }
  return { ok: true, url };
}

export type Destination = { ok: true; address: string; family: 4 | 6 } | { ok: false; error: string };

/**
 * Delivery: the one address to connect to. An IP literal is checked as it is; a name is resolved
 * through the resolver (A, then AAAA) and the first public address taken. Every refused address is
 * skipped, so a name answering with both a public and an internal address reaches only the public one.
 */
export async function destinationOf(url: URL, resolver: Resolver, allowPrivate: boolean): Promise<Destination> {
  const literal = literalAddress(url);
  if (literal) {
    const why = allowPrivate ? null : refusalOf(literal);
    return why
      ? { ok: false, error: `${literal} is not a public address (${why})` }
      : { ok: true, address: literal, family: net.isIPv6(literal) ? 6 : 4 };
  }
  const host = url.hostname;
  const [a, aaaa] = await Promise.all([lookup(() => resolver.a(host)), lookup(() => resolver.aaaa(host))]);
  const found = [...a.addresses, ...aaaa.addresses];
  if (found.length === 0)
    return {
      ok: false,
      error: `${host} does not resolve (${[a.error, aaaa.error].filter(Boolean).join('; ') || 'no addresses'})`,
    };
  const refused: string[] = [];
  for (const address of found) {
    const why = allowPrivate ? null : refusalOf(address);
    if (!why) return { ok: true, address, family: net.isIPv6(address) ? 6 : 4 };
    refused.push(`${address} (${why})`);
  }
  return { ok: false, error: `${host} resolves only to addresses webhooks may not reach: ${refused.join(', ')}` };
}

async function lookup(f: () => Promise<string[]>): Promise<{ addresses: string[]; error?: string }> {
  try {
    return { addresses: (await f()).filter((x) => net.isIP(x)) };
  } catch (err) {
    if (err instanceof DnsError) return { addresses: [], error: err.absent ? undefined : err.message };
    return { addresses: [], error: (err as Error).message };
  }
}
