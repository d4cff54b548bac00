// DANE for SMTP (RFC 7672), the parts without I/O: which TLSA records are usable, and whether the
// certificate chain an MX host presented matches them. DANE-EE (usage 3) pins the server's own
// certificate or key, with no name or expiry check (RFC 7672 §3.1.1); DANE-TA (usage 2) pins a trust
// anchor in the chain the server sends, and the leaf must chain up to it and carry the MX host name
// (§3.1.2, §3.2.3). PKIX-TA and PKIX-EE (usages 0 and 1) are not for SMTP (§3.1.3) and unusable.
import { createHash, X509Certificate } from 'node:crypto';
import type { TlsaRecord } from './resolver.js';

/** RFC 7672 §3.1: usages 2 and 3, selectors 0 (certificate) and 1 (SPKI), matching types 0, 1, 2. */
export const usable = (r: TlsaRecord) =>
  (r.usage === 2 || r.usage === 3) && (r.selector === 0 || r.selector === 1) && r.matchingType <= 2;

/** The bytes a record's selector picks from a certificate, digested as its matching type says. */
function associated(cert: X509Certificate, selector: number, matchingType: number): Buffer {
  const selected = selector === 0 ? cert.raw : cert.publicKey.export({ type: 'spki', format: 'der' });
  if (matchingType === 1) return createHash('sha256').update(selected).digest();
  if (matchingType === 2) return createHash('sha512').update(selected).digest();
  return Buffer.from(selected);
}

const matches = (r: TlsaRecord, cert: X509Certificate) => associated(cert, r.selector, r.matchingType).equals(r.data);

export type DaneMatch = { ok: true; usage: 'DANE-EE' | 'DANE-TA' } | { ok: false; reason: string };

/**
 * `chain` is what the server sent, leaf first; `nowMs` the clock's time. `host` is the MX host name, the
 * reference identifier of DANE-TA (RFC 7672 §3.2.3; this MTA does not follow CNAMEs for TLSA lookups, so
 * there is no other).
 */
export function matchChain(records: TlsaRecord[], chain: X509Certificate[], host: string, nowMs: number): DaneMatch {
  const leaf = chain[0];
  if (!leaf) return { ok: false, reason: 'no certificate presented' };
  const ok = records.filter(usable);
  if (ok.some((r) => r.usage === 3 && matches(r, leaf))) return { ok: true, usage: 'DANE-EE' };
  for (const r of ok.filter((x) => x.usage === 2)) {
    // The trust anchor is some certificate of the chain; every link below it must be signed by the next.
    const at = chain.findIndex((c, i) => i > 0 && matches(r, c));
    if (at < 0) continue;
    let linked = true;
    for (let i = 0; i < at; i++) {
      const child = chain[i]!;
      const parent = chain[i + 1]!;
      if (!child.checkIssued(parent) || !child.verify(parent.publicKey)) linked = false;
    }
    if (!linked) continue;
    // Below a trust anchor the usual certificate rules hold, validity dates included (RFC 7671 §5.2.2).
    const expired = chain.slice(0, at).find((c) => Date.parse(c.validTo) < nowMs || Date.parse(c.validFrom) > nowMs);
    if (expired) return { ok: false, reason: `a certificate below the DANE-TA anchor is outside its validity period` };
    if (!leaf.checkHost(host, { subject: 'default', wildcards: true, partialWildcards: false }))
      return { ok: false, reason: `the certificate chains to a DANE-TA anchor but is not for ${host}` };
    return { ok: true, usage: 'DANE-TA' };
  }
  return { ok: false, reason: `no usable TLSA record of ${host} matches the certificate chain` };
}
