// Which TLS a delivery to a domain must have (issue 19): none beyond opportunistic STARTTLS, or what the
// domain's MTA-STS policy (RFC 8461) demands. Decided once per new connection, from the route's MX hosts.
import { readFileSync } from 'node:fs';
import { createSecureContext, rootCertificates, type SecureContext } from 'node:tls';
import type { Clock } from '../../mail/clock.js';
import type { Resolver } from '../../mail/resolver.js';
import { createStsCache, policyAllows, type FetchResult, type StsCache } from '../../mail/mta-sts.js';
import { createStsFetcher } from './mta-sts-fetch.js';
import type { MxHost } from './route.js';

export type TlsPolicyKind = 'none' | 'mta-sts' | 'dane';
export type TlsVerified = 'webpki' | 'dane' | 'none';

/** What a host must present: nothing (opportunistic), or a certificate valid for its name (webpki). */
export type Requirement = 'none' | 'webpki';

export interface PlannedHost {
  host: MxHost;
  require: Requirement;
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
}

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

  async function plan(domain: string, hosts: MxHost[]): Promise<TlsPlan> {
    const found = await sts.lookup(domain);
    const policy = found.policy;
    if (!policy || policy.mode === 'none') {
      return {
        policy: 'none',
        hosts: hosts.map((host) => ({ host, require: 'none' })),
        failures: [],
        note: found.note,
      };
    }
    const outside = hosts.filter((h) => !policyAllows(policy, h.name));
    const failures = outside.map(
      (h) => `MX host ${h.name} does not match the MTA-STS policy of ${domain} (mx: ${policy.mx.join(', ')})`,
    );
    if (policy.mode === 'testing') {
      // RFC 8461 §5: testing mode delivers as without a policy, and reports what enforce would refuse.
      return {
        policy: 'mta-sts',
        mode: 'testing',
        hosts: hosts.map((host) => ({ host, require: 'none' })),
        failures,
        note: found.note,
      };
    }
    // RFC 8461 §4.2 / §5: enforce: only MX hosts matching the policy, each with a certificate valid
    // for its name (§4.1: the MX host name, not the recipient domain).
    return {
      policy: 'mta-sts',
      mode: 'enforce',
      hosts: hosts.filter((h) => policyAllows(policy, h.name)).map((host) => ({ host, require: 'webpki' })),
      failures,
      note: found.note,
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
