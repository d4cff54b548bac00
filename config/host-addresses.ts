// Whether the addresses of SVC_SOURCE_ADDRESSES belong to this host: a delivery bound to an address the host
// does not have fails at every attempt (EADDRNOTAVAIL), so the MTA refuses to start with one instead.
import os from 'node:os';
import { BlockList, isIP } from 'node:net';
import type { SourceAddresses } from './schema.js';
import { ConfigError } from './load.js';

type Interfaces = ReturnType<typeof os.networkInterfaces>;

const LOOPBACK_V4 = new BlockList();
LOOPBACK_V4.addSubnet('127.0.0.0', 8, 'ipv4');

/**
 * The source addresses that are not the host's, in the order of the variable. os.networkInterfaces() lists
 * only 127.0.0.1 on lo, yet Linux answers for all of 127.0.0.0/8 there (RFC 1122 §3.2.1.3 reserves the block
 * for loopback), so any 127.x address counts as the host's once an up loopback interface has an IPv4
 * address; ::1 is listed as such whenever IPv6 is on, and only then can it be bound.
 */
export function addressesNotOnHost(s: SourceAddresses, interfaces: Interfaces = os.networkInterfaces()): string[] {
  const all = Object.values(interfaces).flatMap((list) => list ?? []);
  const mine = new Set(all.map((i) => i.address.toLowerCase()));
  const loopbackUp = all.some((i) => i.internal && isIP(i.address) === 4 && LOOPBACK_V4.check(i.address, 'ipv4'));
  const wanted = [...new Set([...(s.default ? [s.default] : []), ...Object.values(s.byDomain)])];
  return wanted.filter(
    (a) => !mine.has(a.toLowerCase()) && !(loopbackUp && isIP(a) === 4 && LOOPBACK_V4.check(a, 'ipv4')),
  );
}

/** Throws the one-line ConfigError that stops the start when a source address is not the host's. */
export function checkSourceAddressesOnHost(s: SourceAddresses, interfaces?: Interfaces): void {
  const missing = addressesNotOnHost(s, interfaces);
  if (!missing.length) return;
  const which = missing.length === 1 ? `${missing[0]} is` : `${missing.join(', ')} are`;
  throw new ConfigError([
    `invalid configuration: SVC_SOURCE_ADDRESSES: ${which} not an address of this host ` +
      '(deliveries could not leave from it; add it to an interface, or remove it)',
  ]);
}
