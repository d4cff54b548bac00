// Who the client is, when a proxy (Caddy, a load balancer) may stand in front of a listener. Only the proxies
// the operator names (SVC_TRUSTED_PROXIES) are believed: from anyone else an X-Forwarded-For field is just
// text the client wrote, and believing it would let any client pick the address its rate limits count
// under. Pure: the listener hands in the socket's address and the header.
import net from 'node:net';

/** Whether an address is in a list of networks (trusted proxies, the platform key's networks). */
export type Networks = (address: string) => boolean;

/** "203.0.113.7" from "::ffff:203.0.113.7" (a dual-stack socket's view of an IPv4 peer). */
export const plainAddress = (a: string): string => a.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, '');

/** A CIDR block ("10.0.0.0/8", "::1/128") or a single address. */
export function isCidr(s: string): boolean {
  const [addr = '', bits, extra] = s.split('/');
  const v = net.isIP(addr);
  if (v === 0 || extra !== undefined) return false;
  if (bits === undefined) return true;
  return /^\d{1,3}$/.test(bits) && Number(bits) <= (v === 4 ? 32 : 128);
}

/** A matcher over a list of CIDR blocks or addresses, built once; an empty list matches nothing. */
export function networks(cidrs: readonly string[]): Networks {
  if (!cidrs.length) return () => false;
  const list = new net.BlockList();
  for (const c of cidrs) {
    const [addr = '', bits] = c.split('/');
    const type = net.isIP(addr) === 6 ? 'ipv6' : 'ipv4';
    if (bits === undefined) list.addAddress(addr, type);
    else list.addSubnet(addr, Number(bits), type);
  }
  return (address) => {
    const a = plainAddress(address);
    const v = net.isIP(a);
    return v !== 0 && list.check(a, v === 6 ? 'ipv6' : 'ipv4');
  };
}

/**
 * The client's address: the socket's, unless that is a trusted proxy; then the X-Forwarded-For hops are read
 * from the right (each proxy appends the address it was reached from) past every trusted one, as nginx's
 * real_ip_recursive does. A hop that is not an address ends the walk at the last trusted one.
 */
export function clientAddress(socketAddress: string, forwardedFor: string | undefined, trusted: Networks): string {
  let client = plainAddress(socketAddress);
  if (!forwardedFor || !trusted(client)) return client;
  const hops = forwardedFor.split(',').map((h) => plainAddress(h.trim()));
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = hops[i]!;
    if (net.isIP(hop) === 0) break;
    client = hop;
    if (!trusted(hop)) break;
  }
  return client;
}

/**
 * The key a client's connections are counted under: its IPv4 address, or the /64 of an IPv6 one, since
 * one IPv6 host commonly holds a whole /64 (RFC 4291 §2.5.1) and could otherwise rotate past a limit
 * (the MX's connection counts, the throttles of docs/decisions.md #24).
 */
export function clientKey(address: string): string {
  const a = plainAddress(address);
  if (!net.isIPv6(a)) return a;
  // An embedded IPv4 tail (RFC 4291 §2.2 form 3) is two groups.
  const hex = a
    .toLowerCase()
    .replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_, b1, b2, b3, b4) =>
      [(+b1 << 8) | +b2, (+b3 << 8) | +b4].map((n) => n.toString(16)).join(':'),
    );
  const [head = '', tail = ''] = hex.split('::');
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const groups = [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right];
  return `${groups
    .slice(0, 4)
    .map((g) => g.replace(/^0+(?=.)/, ''))
    .join(':')}::/64`;
}
