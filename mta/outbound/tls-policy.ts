// Which TLS a delivery to a domain must have (issue 19): none beyond opportunistic STARTTLS, or what the
// domain's MTA-STS policy (RFC 8461) demands. Decided once per new connection, from the route's MX hosts.
import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import type { Clock } from '../../mail/clock.js';
import { DnsError, type Resolver, type TlsaRecord } from '../../mail/resolver.js';
import { usable } from '../../mail/dane.js';
import { createStsCache, policyAllows, type FetchResult, type StsCache, type StsFailure } from '../../mail/mta-sts.js';
import { tlsaString, type ReportPolicy, type ResultType } from '../../mail/tls-report.js';
import { createStsFetcher } from './mta-sts-fetch.js';
import type { MxHost } from './route.js';

export type TlsPolicyKind = 'none' | 'mta-sts' | 'dane';
export type TlsVerified = 'webpki' | 'dane' | 'none';

/**
 * What a host must present: nothing (opportunistic), a certificate valid for its name (webpki), or one
 * matching its TLSA records (dane).
 */
export type Requirement = 'none' | 'webpki' | 'dane';

export interface PlannedHost {
  host: MxHost;
  require: Requirement;
  /** The policy this host is under (DANE per host, RFC 7672 §2.2; MTA-STS per domain). */
  policy: TlsPolicyKind;
  /** require 'dane': the usable TLSA records; empty when the RRset had none usable (TLS still required). */
  tlsa?: TlsaRecord[];
}

export interface TlsPlan {
  policy: TlsPolicyKind;
  mode?: 'enforce' | 'testing';
  /** In `enforce`, only hosts the policy allows; in `testing`, every host with `testing` requirements. */
  hosts: PlannedHost[];
  /**
   * Testing mode: every certificate is checked as enforce would, and the failure recorded, not acted on.
   * The failures found before any connection (hosts outside the policy's mx patterns) are here too.
   */
  failures: string[];
  /** Why no policy applies although a domain has an `_mta-sts` record (fetch failed, ...). */
  note?: string;
  /** For TLS reports (RFC 8460 §4.4): the MTA-STS policy in force, its lines and mx patterns. */
  sts?: ReportPolicy;
  /** For TLS reports: why the domain's `_mta-sts` record gave no policy (RFC 8460 §4.3.2.2). */
  stsFailure?: StsFailure;
  /** For TLS reports: the hosts left out before any connection, each a failed session. */
  refused?: { host: string; policy: ReportPolicy; result: ResultType; detail: string }[];
}

const NO_POLICY: ReportPolicy = { type: 'no-policy-found', strings: [], mxHost: [] };

export interface TlsPolicyOptions {
  resolver: Resolver;
  clock: Clock;
  /** SVC_EXTRA_CA_CERTS path, or null. */
  extraCaCerts: string | null;
  /** SVC_MTA_STS_PORT. */
  mtaStsPort: number;
  allowPrivate: boolean;
  /** Replaces the https fetch (unit tests of the cache). */
  fetch?: (domain: string) => Promise<FetchResult>;
}

/** System roots plus the operator's extra CAs: one context for MX STARTTLS and policy fetches alike. */
export function trustContext(extraCaCerts: string | null): SecureContext {
  const extra = extraCaCerts ? readFileSync(extraCaCerts, 'utf8') : null;
  return createSecureContext({ ca: extra ? [...rootCertificates, extra] : [...rootCertificates] });
}

export function createTlsPolicy(o: TlsPolicyOptions) {
  const secureContext = trustContext(o.extraCaCerts);
  const fetch =
    o.fetch ??
    createStsFetcher({ resolver: o.resolver, secureContext, port: o.mtaStsPort, allowPrivate: o.allowPrivate });
  const sts: StsCache = createStsCache({ clock: o.clock, txt: (name) => txtOrNone(o.resolver, name), fetch });

  async function stsPlan(domain: string, hosts: MxHost[]): Promise<TlsPlan> {
    const found = await sts.lookup(domain);
    const policy = found.policy;
    if (!policy || policy.mode === 'none') {
      return {
        policy: 'none',
        hosts: hosts.map((host) => ({ host, require: 'none', policy: 'none' })),
        failures: [],
        note: found.note,
        ...(found.failure ? { stsFailure: found.failure } : {}),
      };
    }
    const report: ReportPolicy = { type: 'sts', strings: policy.lines ?? [], mxHost: policy.mx };
    const outside = hosts.filter((h) => !policyAllows(policy, h.name));
    const failures = outside.map(
      (h) => `MX host ${h.name} does not match the MTA-STS policy of ${domain} (mx: ${policy.mx.join(', ')})`,
    );
    const refused = outside.map((h, i) => ({
      host: h.name,
      policy: report,
      result: 'validation-failure' as const,
      detail: failures[i]!,
    }));
    if (policy.mode === 'testing') {
      // RFC 8461 §5: testing mode delivers as without a policy, and reports what enforce would refuse.
      return {
        policy: 'mta-sts',
        mode: 'testing',
        hosts: hosts.map((host) => ({ host, require: 'none', policy: 'mta-sts' })),
        failures,
        note: found.note,
        sts: report,
        refused,
      };
    }
    // RFC 8461 §4.2 / §5: enforce: only MX hosts matching the policy, each with a certificate valid
    // for its name (§4.1: the MX host name, not the recipient domain).
    return {
      policy: 'mta-sts',
      mode: 'enforce',
      hosts: hosts
        .filter((h) => policyAllows(policy, h.name))
        .map((host) => ({ host, require: 'webpki', policy: 'mta-sts' })),
      failures,
      note: found.note,
      sts: report,
      refused,
    };
  }

  /**
   * DANE (RFC 7672 §2.2): only when the MX RRset is DNSSEC-authenticated (the AD bit of the validating
   * resolver of SVC_DNS_SERVERS), each MX host's `_25._tcp.<host>` TLSA RRset. A secure, non-empty one
   * makes TLS mandatory for that host and the certificate must match a usable record; a TLSA lookup
   * that fails makes the host unusable (§2.2: it might have had records). Null: DANE does not apply.
   */
  async function danePlan(
    domain: string,
    hosts: MxHost[],
  ): Promise<Map<string, { tlsa: TlsaRecord[] } | { failure: string }> | null> {
    let authenticated = false;
    try {
      authenticated = (await o.resolver.mxSecure(domain)).authenticated;
    } catch {
      return null; // no MX records (implicit MX): DANE for the domain itself is not attempted here
    }
    if (!authenticated) return null;
    const out = new Map<string, { tlsa: TlsaRecord[] } | { failure: string }>();
    for (const h of hosts) {
      try {
        const found = await o.resolver.tlsa(`_25._tcp.${h.name}`);
        if (found.authenticated && found.records.length) out.set(h.name, { tlsa: found.records.filter(usable) });
      } catch (err) {
        const why = err instanceof DnsError ? err.failure : (err as Error).message;
        out.set(h.name, { failure: `TLSA lookup of _25._tcp.${h.name} failed (${why}): the host is unusable` });
      }
    }
    return out;
  }

  /** DANE wins over MTA-STS (RFC 8461 §2): a host with TLSA records is judged by them, the others by MTA-STS. */
  async function plan(domain: string, hosts: MxHost[]): Promise<TlsPlan> {
    const [stsP, dane] = await Promise.all([stsPlan(domain, hosts), danePlan(domain, hosts)]);
    if (!dane || dane.size === 0) return stsP;
    const failures = [...stsP.failures];
    const refused = (stsP.refused ?? []).filter((r) => !dane.has(r.host));
    const planned: PlannedHost[] = [];
    for (const host of hosts) {
      const d = dane.get(host.name);
      if (d && 'tlsa' in d) planned.push({ host, require: 'dane', policy: 'dane', tlsa: d.tlsa });
      else if (d) {
        failures.push(d.failure);
        const policy: ReportPolicy = { type: 'tlsa', strings: [], mxHost: [host.name] };
        refused.push({ host: host.name, policy, result: 'tlsa-invalid', detail: d.failure });
      } else {
        const s = stsP.hosts.find((p) => p.host === host);
        if (s) planned.push(s);
      }
    }
    const anyDane = planned.some((p) => p.policy === 'dane');
    return {
      policy: anyDane ? 'dane' : stsP.policy,
      // The MTA-STS mode still describes the hosts without TLSA records.
      ...(stsP.mode ? { mode: stsP.mode } : {}),
      hosts: planned,
      failures,
      note: stsP.note,
      ...(stsP.sts ? { sts: stsP.sts } : {}),
      ...(stsP.stsFailure ? { stsFailure: stsP.stsFailure } : {}),
      refused,
    };
  }

  return { plan, secureContext, sts };
}

/** A TXT lookup where "no such record" is an empty answer and only a failing DNS throws. */
async function txtOrNone(resolver: Resolver, name: string): Promise<string[]> {
  try {
    return await resolver.txt(name);
  } catch (err) {
    if ((err as { absent?: boolean }).absent) return [];
    throw err;
  }
}

export type TlsPolicy = ReturnType<typeof createTlsPolicy>;

/** The report policy (RFC 8460 §4.4) a planned host is under. */
export function reportPolicyOf(planned: PlannedHost, plan: TlsPlan): ReportPolicy {
  if (planned.policy === 'dane')
    return { type: 'tlsa', strings: (planned.tlsa ?? []).map(tlsaString), mxHost: [planned.host.name] };
  if (planned.policy === 'mta-sts' && plan.sts) return plan.sts;
  return NO_POLICY;
}
