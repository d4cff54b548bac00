// Which local address a delivery leaves from (dedicated IPs): the entry of SVC_SOURCE_ADDRESSES for the
// sending domain or its nearest parent, else the default, else none (the system chooses).
import type { SourceAddresses } from '../../config/schema.js';

/** `envelopeFrom` is the VERP return path, which sits under the sending domain. */
export function sourceAddressFor(s: SourceAddresses, envelopeFrom: string): string | null {
  let domain = envelopeFrom.slice(envelopeFrom.lastIndexOf('@') + 1).toLowerCase();
  for (;;) {
    const hit = s.byDomain[domain];
    if (hit) return hit;
    const dot = domain.indexOf('.');
    if (dot < 0) return s.default;
    domain = domain.slice(dot + 1);
  }
}
