// The DNS records a domain claim and its capabilities ask the customer to publish. A function of the
// operator's host names only, so the console (which shows them), `svc doctor` (which checks them) and
// any later product compute exactly the same records. See docs/dns-records.md.
import { dkimTxtValue, type DkimAlgorithm } from './dkim-keys.js';

export interface DnsRecord {
  host: string;
  type: 'TXT' | 'MX' | 'CNAME';
  value: string;
  priority?: number;
}

/** The operator's names that records point at (SVC_HOSTNAME, SVC_MX_HOST). */
export interface RecordHosts {
  hostname: string;
  mxHost: string;
}

const txt = (host: string, value: string) => ({ host, type: 'TXT' as const, value });
const mx = (host: string, value: string) => ({ host, type: 'MX' as const, value, priority: 10 });

/** The TXT record that proves control of a claimed domain. */
export const ownershipRecord = (c: { domain: string; verifyToken: string }) =>
  txt(`_svc-verify.${c.domain}`, `svc-verify=${c.verifyToken}`);

export interface OutboundKeys {
  domain: string;
  dkimSelector: string;
  dkimPublic: string;
  ed25519Selector: string | null;
  ed25519Public: string | null;
  returnPathSubdomain: string;
}

/** The records of a sending capability: DKIM (RSA, and Ed25519 when it has one), SPF, DMARC, return path. */
export function outboundRecords(o: OutboundKeys, hosts: RecordHosts) {
  const returnPathDomain = `${o.returnPathSubdomain}.${o.domain}`;
  const dkim = (selector: string, algorithm: DkimAlgorithm, key: string) =>
    txt(`${selector}._domainkey.${o.domain}`, dkimTxtValue(algorithm, key));
  return {
    returnPathDomain,
    dnsRecords: {
      dkim: dkim(o.dkimSelector, 'rsa', o.dkimPublic),
      ...(o.ed25519Selector && o.ed25519Public
        ? { dkimEd25519: dkim(o.ed25519Selector, 'ed25519', o.ed25519Public) }
        : {}),
      // Recommended: the MTA sends from SVC_HOSTNAME's addresses.
      spf: txt(o.domain, `v=spf1 a:${hosts.hostname} ~all`),
      dmarc: txt(`_dmarc.${o.domain}`, 'v=DMARC1; p=none; adkim=r; aspf=r'),
      // The VERP return path (docs/decisions.md #10): bounces come back to our MX, and SPF of the
      // envelope sender's domain passes for our hosts only.
      returnPath: {
        mx: mx(returnPathDomain, hosts.mxHost),
        spf: txt(returnPathDomain, `v=spf1 a:${hosts.hostname} -all`),
      },
    },
  };
}

/** The record of a receiving capability: its MX at SVC_MX_HOST. */
export const inboundRecords = (i: { domain: string }, hosts: RecordHosts) => ({ mx: mx(i.domain, hosts.mxHost) });
