// Custom webmail domains of an organization (docs/api.md §4.4) and the allow check of §4.12 that gates
// on-demand certificates: registering, verifying by DNS (through the context's resolver) and asking whether
// a name is a verified custom domain. The caller has already checked access to the organization.
import { randomUUID } from 'node:crypto';
import { BlockList, isIP } from 'node:net';
import { fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { normalizeDomain } from '../mail/domain-names.js';
import type { Config } from '../config/schema.js';
import { DnsError, type Resolver } from '../mail/resolver.js';
import {
  insertCustomDomain,
  isVerifiedCustomDomain,
  markCustomDomainVerified,
  recordVerifyAttempt,
  type CustomDomain,
} from '../storage/pg/custom-domains.js';

type WebmailConfig = Pick<Config, 'hostname' | 'mxHost' | 'webmailHost' | 'webmailAddresses'>;

/** docs/api.md §2.2 custom domain DNS record: what the customer publishes at the domain. */
export function dnsRecordFor(domain: string, c: WebmailConfig) {
  const apex = c.webmailAddresses.length
    ? ' An apex domain, which cannot hold a CNAME, may instead have A/AAAA records that all point at ' +
      `${c.webmailAddresses.join(', ')}.`
    : '';
  return {
    host: domain,
    type: 'CNAME' as const,
    value: c.webmailHost,
    note: `Point ${domain} at ${c.webmailHost} with a CNAME record.${apex} Once verified, webmail is served at https://${domain}/ with a certificate issued automatically.`,
  };
}

/** The platform's own names (and names under them) are not for customers to register. */
function reservedBy(domain: string, c: WebmailConfig): string | null {
  for (const name of [c.webmailHost, c.mxHost, c.hostname]) {
    if (domain === name || domain.endsWith(`.${name}`)) return name;
  }
  return null;
}

type WebmailDnsVerdict =
  { ok: true; via: 'cname' | 'addresses' } | { ok: false; message: string; details: Record<string, unknown> };

const absent = (err: unknown) => err instanceof DnsError && err.absent;
const hostOf = (name: string) => name.toLowerCase().replace(/\.$/, '');

/**
 * Whether `domain` points at the webmail service now (docs/api.md §3): its CNAME is the webmail host, or it
 * has no CNAME (an apex cannot have one, RFC 1034 §3.6.2) and every one of its A/AAAA records, of
 * which there is at least one, is a webmail address. Lookups skip the cache; a resolver that does
 * not answer (timeout, SERVFAIL) gives a verdict that says so, never a hang or a 500.
 */
async function checkWebmailDns(resolver: Resolver, domain: string, c: WebmailConfig): Promise<WebmailDnsVerdict> {
  const fresh = { fresh: true };
  const expected = { host: domain, type: 'CNAME', value: c.webmailHost };
  const useAddresses = c.webmailAddresses.length > 0;
  // All lookups at once: one resolver timeout at most, not one per record type.
  const [cname, a, aaaa] = await Promise.allSettled([
    resolver.cname(domain, fresh),
    useAddresses ? resolver.a(domain, fresh) : Promise.resolve([]),
    useAddresses ? resolver.aaaa(domain, fresh) : Promise.resolve([]),
  ]);
  const unanswered = (r: PromiseSettledResult<unknown>) => {
    if (r.status === 'fulfilled' || absent(r.reason)) return null;
    if (r.reason instanceof DnsError) return r.reason;
    throw r.reason;
  };
  const dnsFailed = (e: DnsError): WebmailDnsVerdict => ({
    ok: false,
    message:
      `DNS did not answer the ${e.type} lookup of ${domain} (${e.failure}); ` + 'nothing was changed, try again later.',
    details: { expected, dnsFailure: e.failure, lookup: { host: e.host, type: e.type } },
  });

  const cnameFailure = unanswered(cname);
  if (cnameFailure) return dnsFailed(cnameFailure);
  const target = cname.status === 'fulfilled' && cname.value ? hostOf(cname.value) : null;
  if (target === hostOf(c.webmailHost)) return { ok: true, via: 'cname' };
  if (target) {
    return {
      ok: false,
      message: `The CNAME of ${domain} points at ${target}, not at ${c.webmailHost}.`,
      details: { expected, found: { cname: target } },
    };
  }

  const publish = `Publish ${domain} CNAME ${c.webmailHost}`;
  if (!useAddresses) {
    return {
      ok: false,
      message: `${domain} has no CNAME record. ${publish}.`,
      details: { expected, found: { cname: null } },
    };
  }
  for (const r of [a, aaaa]) {
    const failure = unanswered(r);
    if (failure) return dnsFailed(failure);
  }
  const v4 = a.status === 'fulfilled' ? a.value : [];
  const v6 = aaaa.status === 'fulfilled' ? aaaa.value : [];
  const found = { cname: null, a: v4, aaaa: v6 };
  const apexHint = `or, at an apex, A/AAAA records pointing only at ${c.webmailAddresses.join(', ')}`;
  if (v4.length + v6.length === 0) {
    return {
      ok: false,
      message: `${domain} has no CNAME and no A or AAAA records. ${publish}, ${apexHint}.`,
      details: { expected, found },
    };
  }
  const allowed = new BlockList();
  for (const ip of c.webmailAddresses) {
    const family = isIP(ip);
    if (family) allowed.addAddress(ip, family === 6 ? 'ipv6' : 'ipv4');
  }
  const outside = [...v4, ...v6].filter((ip) => {
    const family = isIP(ip);
    return !family || !allowed.check(ip, family === 6 ? 'ipv6' : 'ipv4');
  });
  if (outside.length === 0) return { ok: true, via: 'addresses' };
  return {
    ok: false,
    message:
      `${domain} has no CNAME, and its A/AAAA records include ${outside.join(', ')}, which ` +
      `${outside.length === 1 ? 'is not a webmail address' : 'are not webmail addresses'}. ${publish}, ${apexHint}.`,
    details: { expected, found, notWebmailAddresses: outside },
  };
}

const noSuchDomain = () => fail('not_found', 'No such custom domain.');

/** Registers a name for the organization's webmail; 409 for the platform's own names and names taken. */
export async function registerCustomDomain(
  deps: CoreDeps,
  organizationId: string,
  name: string,
  now: Date,
): Promise<CustomDomain> {
  const domain = normalizeDomain(name);
  if (!domain) {
    throw fail(
      'invalid_domain',
      'Not a valid host name: it needs at least two labels of letters, digits and hyphens (not at either end), ' +
        'each at most 63 characters and at most 253 in all, and cannot be an IP address.',
    );
  }
  const reserved = reservedBy(domain, deps.ctx.config);
  if (reserved) throw fail('custom_domain_taken', `${domain} is reserved by the platform (${reserved}).`);
  // No read first: the UNIQUE constraint decides, also between two registrations at the same moment.
  const row = await insertCustomDomain(deps.storage.db, { id: randomUUID(), organizationId, domain, now });
  if (row === 'taken') throw fail('custom_domain_taken', `${domain} is already registered as a custom domain.`);
  return row;
}

/** Records the attempt, checks the DNS and marks the domain verified; 400 cname_not_found when it does not point. */
export async function verifyCustomDomain(
  deps: CoreDeps,
  organizationId: string,
  id: string,
  now: Date,
): Promise<CustomDomain> {
  const { db } = deps.storage;
  // Written and committed first, on its own: a verification that fails keeps it (docs/api.md §3).
  const row = await recordVerifyAttempt(db, organizationId, id, now);
  if (!row) throw noSuchDomain();
  if (row.status === 'disabled') throw fail('conflict', `${row.domain} is disabled.`);
  const verdict = await checkWebmailDns(deps.ctx.resolver, row.domain, deps.ctx.config);
  // A failed check leaves the status as it is (docs/api.md §3 defines no move out of `verified`).
  if (!verdict.ok) throw fail('cname_not_found', verdict.message, verdict.details);
  const verified = await markCustomDomainVerified(db, row.id, now);
  if (!verified) throw noSuchDomain();
  return verified;
}

/**
 * Whether a name (normalized as registration does, so `Mail.Example.COM.` asks about `mail.example.com`) is a
 * verified custom domain.
 */
export async function isCustomDomainAllowed(deps: CoreDeps, name: string): Promise<boolean> {
  const domain = normalizeDomain(name);
  return domain !== null && (await isVerifiedCustomDomain(deps.storage.db, domain));
}
