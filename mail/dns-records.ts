// The DNS records a domain claim and its capabilities ask the customer to publish. A function of the
// operator's host names only, so the console (which shows them), `svc doctor` (which checks them) and
// any later product compute exactly the same records. See docs/dns-records.md.
import { dkimTxtValue, type DkimAlgorithm } from './dkim-keys.js';

export interface DnsRecord {
  host: string;
  type: 'TXT' | 'MX' | 'CNAME';
  value: string;
  priority?: number;
  /** What to do with it beyond publishing it as shown (merge it, create a mailbox). */
  note?: string;
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
  /**
   * The SPF record found at the domain by the capability's verify (core/domains.ts), if any: the suggestion is
   * then that record with our include merged in. Absent where nothing looked (the claim's reads, `svc doctor`).
   */
  publishedSpf?: string | null;
}

/**
 * The name of the SPF record the operator publishes for the addresses mail leaves from (docs/dns-records.md):
 * customers include it (RFC 7208 §5.2), so a change of addresses is one record, the operator's, not one per
 * customer domain, and a customer's own SPF record keeps its other senders.
 */
export const operatorSpfHost = (hosts: Pick<RecordHosts, 'hostname'>) => `_spf.${hosts.hostname}`;

/** The operator's own SPF record at operatorSpfHost: SVC_HOSTNAME's addresses (docs/dns-records.md). */
export const operatorSpfRecord = (hosts: Pick<RecordHosts, 'hostname'>) =>
  txt(operatorSpfHost(hosts), `v=spf1 a:${hosts.hostname} -all`);

/** RFC 7208 §4.5: an SPF record is a TXT record starting with "v=spf1" followed by a space or its end. */
export const isSpfRecord = (v: string) => /^v=spf1(\s|$)/i.test(v.trim());

/**
 * An SPF record with `include:<ours>` merged in (RFC 7208 §3.2: a domain has one SPF record, a second is a
 * permerror): placed before its `all` or `redirect=` (RFC 7208 §5.1, §6.1: terms after `all` are never
 * reached, and `redirect` applies only when no mechanism matched), else at its end; unchanged when it has it.
 */
export function mergeSpfInclude(record: string, include: string): string {
  const terms = record.trim().split(/\s+/);
  const ours = `include:${include}`.toLowerCase();
  if (terms.some((term) => term.toLowerCase().replace(/^\+/, '') === ours)) return terms.join(' ');
  const at = terms.findIndex((term, i) => i > 0 && /^([-~?+]?all|redirect=.*)$/i.test(term));
  terms.splice(at < 0 ? terms.length : at, 0, `include:${include}`);
  return terms.join(' ');
}

/** Where the suggested DMARC record sends aggregate reports: a mailbox at the customer's own domain. */
export const dmarcReportAddress = (domain: string) => `dmarc-reports@${domain}`;

/** The suggested SPF record at a sending domain: an include of the operator's record, merged into theirs. */
function spfRecord(o: OutboundKeys, hosts: RecordHosts): DnsRecord {
  const include = operatorSpfHost(hosts);
  const published = o.publishedSpf;
  if (!published) return txt(o.domain, `v=spf1 include:${include} ~all`);
  const merged = mergeSpfInclude(published, include);
  return merged === published.trim().split(/\s+/).join(' ')
    ? { ...txt(o.domain, merged), note: 'Published: your SPF record already includes ours.' }
    : {
        ...txt(o.domain, merged),
        note:
          `Merge into your existing SPF record: ${o.domain} has one (${published.trim()}), and a second one ` +
          `would make SPF fail for all your mail (RFC 7208 §3.2); add include:${include} to it, as shown.`,
      };
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
      // Recommended: the MTA sends from the addresses of the operator's SPF record, included (a complete record
      // here would be a second SPF record on a domain that has one: a permerror, RFC 7208 §3.2).
      spf: spfRecord(o, hosts),
      // A starting point that reports: p=none, aggregate reports (RFC 7489 §7.2) to a mailbox at the domain itself,
      // which needs no authorization record (RFC 7489 §7.1 is for addresses at another domain).
      dmarc: {
        ...txt(`_dmarc.${o.domain}`, `v=DMARC1; p=none; rua=mailto:${dmarcReportAddress(o.domain)}; adkim=r; aspf=r`),
        note:
          `Aggregate reports go to ${dmarcReportAddress(o.domain)}: create that mailbox, or put an address of your ` +
          'own in rua=. Tighten p= once your mail passes. An existing DMARC record of yours stays as it is.',
      },
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
