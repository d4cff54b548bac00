// "host[:port]" as SVC_DNS_SERVERS (and /etc/resolv.conf through node:dns) write a server: an IPv4
// address, an IPv6 address (bracketed when it has a port), or a host name, with an optional port.
import { isIP } from 'node:net';

export interface HostPort {
  host: string;
  port: number;
}

/** RFC 1123 §2.1 host names: labels of letters, digits and hyphens, at most 253 characters, a trailing dot allowed. */
export const HOSTNAME_PATTERN =
  '^(?=.{1,253}$)([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\\.?$';
const HOSTNAME = new RegExp(HOSTNAME_PATTERN);

export function parseHostPort(item: string, defaultPort: number): HostPort | null {
  const s = item.trim();
  // [v6]:port, v6 alone, v4:port, v4 alone, name:port
  const bracketed = /^\[([^\]]+)\](?::(\d{1,5}))?$/.exec(s);
  if (bracketed) {
    const host = bracketed[1] ?? '';
    const p = bracketed[2] === undefined ? defaultPort : Number(bracketed[2]);
    return isIP(host) === 6 && p > 0 && p < 65536 ? { host, port: p } : null;
  }
  if (isIP(s) === 6) return { host: s, port: defaultPort };
  const m = /^([^:\s]+)(?::(\d{1,5}))?$/.exec(s);
  if (!m) return null;
  const host = m[1] ?? '';
  const p = m[2] === undefined ? defaultPort : Number(m[2]);
  if (!(p > 0 && p < 65536)) return null;
  if (isIP(host) === 4 || HOSTNAME.test(host)) return { host, port: p };
  return null;
}
