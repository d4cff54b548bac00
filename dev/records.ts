// What the development DNS zone answers (docs/development.md): every record the service asks a customer to
// publish, read from the database on each question and computed by the very functions the API shows them
// with (mail/dns-records.ts), so claiming a domain, adding sending or receiving and rotating a DKIM key
// verify at once; the platform's own names on loopback; and a catch-all MX (the dev SMTP sink) for every
// other domain, so all outbound mail is caught.
import { promises as dns } from 'node:dns';
import { isIP } from 'node:net';
import { dkimTxtValue } from '../mail/dkim-keys.js';
import { inboundRecords, outboundRecords, ownershipRecord, type DnsRecord } from '../mail/dns-records.js';
import { findClaimByDomain, listInbound, listOutbound } from '../storage/pg/domains.js';
import type { Queryable } from '../storage/pg/client.js';
import type { DevAnswer, DevRecord } from './zone.js';

export interface DevHosts {
  hostname: string;
  mxHost: string;
  webmailHost: string;
  /** The MX host of the catch-all sink (on loopback like every platform name). */
  sinkHost: string;
}

const norm = (name: string) => name.toLowerCase().replace(/\.$/, '');

/** The records the service asks the customers of every claim at or above `name` to publish. */
export async function publishedRecords(q: Queryable, name: string, hosts: DevHosts): Promise<DnsRecord[]> {
  const labels = name.split('.');
  const out: DnsRecord[] = [];
  // A capability may sit on a subdomain of its claim: look at the claims of every enclosing name.
  for (let i = 0; i < labels.length - 1; i++) {
    const claim = await findClaimByDomain(q, labels.slice(i).join('.'));
    if (!claim) continue;
    out.push(ownershipRecord(claim));
    const [outs, ins] = await Promise.all([listOutbound(q, [claim.id]), listInbound(q, [claim.id])]);
    for (const o of outs) {
      const { dnsRecords: r } = outboundRecords(o, hosts);
      out.push(r.dkim, r.spf, r.dmarc, r.returnPath.mx, r.returnPath.spf);
      if (r.dkimEd25519) out.push(r.dkimEd25519);
      // A key minted by a rotation is published at once, so its verification promotes it.
      if (o.pendingDkimSelector && o.pendingDkimAlgorithm && o.pendingDkimPublic)
        out.push({
          host: `${o.pendingDkimSelector}._domainkey.${o.domain}`,
          type: 'TXT',
          value: dkimTxtValue(o.pendingDkimAlgorithm, o.pendingDkimPublic),
        });
    }
    for (const i of ins) out.push(inboundRecords(i, hosts).mx);
  }
  return out.filter((r) => norm(r.host) === name);
}

function asDev(r: DnsRecord): DevRecord {
  if (r.type === 'MX') return { type: 'MX', priority: r.priority ?? 10, exchange: norm(r.value) };
  if (r.type === 'CNAME') return { type: 'CNAME', domain: norm(r.value) };
  return { type: 'TXT', value: r.value };
}

/** Address records of a name that is none of ours (a webhook URL's host): asked of the system's resolvers. */
async function systemAddresses(name: string, type: 'A' | 'AAAA'): Promise<DevAnswer> {
  const resolver = new dns.Resolver({ timeout: 2_000, tries: 1 });
  try {
    const addresses = type === 'A' ? await resolver.resolve4(name) : await resolver.resolve6(name);
    return { records: addresses.map((address) => ({ type, address })), exists: true };
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === dns.NOTFOUND) return { records: [], exists: false };
    if (code === dns.NODATA) return { records: [], exists: true };
    return 'servfail';
  }
}

/** The answer of the development zone to (name, type). */
export function devLookup(q: () => Queryable | null, hosts: DevHosts) {
  const platform = new Set([hosts.hostname, hosts.mxHost, hosts.webmailHost, hosts.sinkHost].map(norm));
  return async (rawName: string, type: string): Promise<DevAnswer> => {
    const name = norm(rawName);
    // RFC 6761 §6.3: localhost names are loopback; the platform's own names are too, in development.
    if (name === 'localhost' || name.endsWith('.localhost') || platform.has(name)) {
      return { records: type === 'A' ? [{ type: 'A', address: '127.0.0.1' }] : [], exists: true };
    }
    const db = q();
    if (!db) return 'servfail';
    const published = isIP(name) ? [] : await publishedRecords(db, name, hosts);
    const matching = published.filter((r) => r.type === type).map(asDev);
    if (matching.length) return { records: matching, exists: true };
    switch (type) {
      case 'MX':
        // The catch-all: every other domain's mail goes to the sink.
        return { records: [{ type: 'MX', priority: 10, exchange: hosts.sinkHost }], exists: true };
      case 'CNAME':
        // Custom webmail domains (docs/api.md §4.4) point at the webmail host: any name does here.
        return { records: [{ type: 'CNAME', domain: hosts.webmailHost }], exists: true };
      case 'A':
      case 'AAAA':
        return systemAddresses(name, type);
      default:
        return { records: [], exists: published.length > 0 };
    }
  };
}
