// Where mail for a domain goes (RFC 5321 §5.1): its MX hosts by preference, or the domain itself
// when it has no MX (the implicit MX), and nowhere at all for a null MX (RFC 7505). Every lookup
// goes through the Context's resolver (cached, aimed at SVC_DNS_SERVERS).
import { isIP } from 'node:net';
import { DnsError, type MxRecord, type Resolver } from '../../mail/resolver.js';
import { DOMAIN_UNKNOWN, NULL_MX, SmtpReply } from '../../mail/smtp-reply.js';
import { refusalOf } from '../../mail/webhook-target.js';

export interface MxHost {
  /** The host name (for TLS SNI and logs). */
  name: string;
  /** Its addresses, IPv4 first (most receivers judge IPv4 senders by a longer reputation history). */
  addresses: string[];
}

export type Route =
  /** `refused`: addresses skipped because they are not public (SVC_ALLOW_PRIVATE_MX off), for the event. */
  | { kind: 'hosts'; hosts: MxHost[]; refused: string[] }
  /** No delivery possible now; the reply-shaped reason goes through bounce classification like a remote one. */
  | { kind: 'unroutable'; reply: SmtpReply }
  /** DNS did not answer: try again later. */
  | { kind: 'dns_error'; message: string };

async function addressesOf(
  resolver: Resolver,
  name: string,
  family: 4 | 6 | null,
): Promise<{ addresses: string[]; absent: boolean }> {
  if (isIP(name)) return { addresses: [name], absent: false };
  const lookups = await Promise.allSettled([
    family === 6 ? Promise.resolve([]) : resolver.a(name),
    family === 4 ? Promise.resolve([]) : resolver.aaaa(name),
  ]);
  const addresses = lookups.flatMap((r) => (r.status === 'fulfilled' ? r.value : []));
  const absent = lookups.every((r) => r.status === 'fulfilled' || (r.reason instanceof DnsError && r.reason.absent));
  return { addresses, absent };
}

/** Equal preferences are shuffled (RFC 5321 §5.1) so that load spreads over them. */
function byPreference<T extends { priority: number }>(records: T[]): T[] {
  return records
    .map((r) => ({ r, tie: Math.random() }))
    .sort((a, b) => a.r.priority - b.r.priority || a.tie - b.tie)
    .map((x) => x.r);
}

/**
 * Every MX host resolves only to addresses we may not deliver to (RFC 5321 §5.1: "If MX records are
 * present, but none of them are usable [...] this situation MUST be reported as an error"): a permanent
 * failure, as for a null MX (RFC 7505), since the domain's own DNS sends its mail where the public
 * internet cannot go. 5.4.4 is "unable to route" (RFC 3463).
 */
export const PRIVATE_MX = new SmtpReply(550, '5.4.4', 'Every MX host of the domain has a non-public address');

/**
 * Resolves a destination domain. `family` restricts addresses to the family of the source address
 * a delivery must leave from (a socket bound to IPv4 cannot reach an IPv6 host). Unless
 * `allowPrivate` (SVC_ALLOW_PRIVATE_MX), loopback, private, link-local and other non-public addresses
 * (mail/webhook-target.ts, the same classification as webhooks) are dropped: a recipient domain must
 * not aim our MTA at our own network.
 */
export async function resolveRoute(
  resolver: Resolver,
  domain: string,
  family: 4 | 6 | null = null,
  allowPrivate = false,
): Promise<Route> {
  let mx: MxRecord[];
  try {
    mx = await resolver.mx(domain);
  } catch (err) {
    if (!(err instanceof DnsError)) throw err;
    if (err.failure === 'NXDOMAIN') {
      return { kind: 'unroutable', reply: DOMAIN_UNKNOWN.with(`Domain ${domain} does not exist (NXDOMAIN)`) };
    }
    if (err.failure !== 'NODATA') return { kind: 'dns_error', message: err.message };
    mx = [];
  }
  // RFC 7505: a single MX of "." with preference 0 says the domain takes no mail.
  if (mx.length === 1 && mx[0]!.exchange === '') {
    return { kind: 'unroutable', reply: NULL_MX.with(`${domain} does not accept mail (null MX, RFC 7505)`) };
  }
  // RFC 5321 §5.1: no MX records: the domain itself is the host (the implicit MX).
  const names = mx.length ? byPreference(mx.filter((r) => r.exchange !== '')).map((r) => r.exchange) : [domain];
  const hosts: MxHost[] = [];
  const refused: string[] = [];
  let allAbsent = true;
  let unresolved = false;
  for (const name of names) {
    const found = await addressesOf(resolver, name, family);
    allAbsent &&= found.absent;
    if (!found.addresses.length) unresolved = true;
    const addresses = allowPrivate
      ? found.addresses
      : found.addresses.filter((a) => {
          const why = refusalOf(a);
          if (why) refused.push(`${name} ${a} (${why})`);
          return !why;
        });
    if (addresses.length)
      hosts.push({
        name,
        addresses: addresses.filter((a) => isIP(a) === 4).concat(addresses.filter((a) => isIP(a) === 6)),
      });
  }
  if (hosts.length) return { kind: 'hosts', hosts, refused };
  // Some host had addresses, all refused, and no other host is waiting for its DNS to be fixed.
  if (refused.length && !unresolved) {
    return {
      kind: 'unroutable',
      reply: PRIVATE_MX.with(`MX hosts of ${domain} are not public: ${refused.join(', ')}`),
    };
  }
  if (mx.length === 0 && allAbsent) {
    return { kind: 'unroutable', reply: DOMAIN_UNKNOWN.with(`${domain} has no MX and no address records`) };
  }
  // MX hosts without addresses are a misconfiguration the receiver may fix soon: keep trying.
  return { kind: 'dns_error', message: `no address for the MX hosts of ${domain}: ${names.join(', ')}` };
}
