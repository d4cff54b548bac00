// MTA-STS (RFC 8461), the parts without I/O: the `_mta-sts` TXT record, the policy file, MX pattern
// matching, and the per-domain policy cache with its refresh rule. The DNS lookup and the https fetch
// are handed in (mta/outbound/mta-sts-fetch.ts does the fetch), and time comes from the injected clock.
//
// The cache lives in memory: a restart forgets every policy and fetches them again at the next
// delivery to each domain. RFC 8461 §5.1 wants a cached policy used until it expires even when the
// TXT record or the policy host is gone; a restarting MTA loses that protection for the domains an
// attacker could strip the TXT record of during the restart window, an accepted trade for a cache
// without a table (docs/operations.md, Outbound TLS).
import type { Clock } from './clock.js';

export type StsMode = 'enforce' | 'testing' | 'none';

export interface StsPolicy {
  mode: StsMode;
  /** MX patterns (RFC 8461 §4.1): a host name or `*.` followed by one, lower case. */
  mx: string[];
  /** Seconds the policy may be cached (RFC 8461 §3.2: at most 31557600, one year). */
  maxAgeS: number;
  /** The policy file's non-empty lines as served: the `policy-string` of a TLS report (RFC 8460 §4.4). */
  lines?: string[];
}

/** RFC 8461 §3.2: max_age is at most 31557600 seconds. */
export const MAX_AGE_LIMIT_S = 31_557_600;

/**
 * The policy id of the `_mta-sts.<domain>` TXT records (RFC 8461 §3.1), or null when the domain has no
 * usable record: records not starting with `v=STSv1` are ignored, and anything but exactly one
 * well-formed record left means no policy.
 */
export function parseStsRecord(txts: string[]): string | null {
  const ours = txts.filter((t) => /^v=STSv1\s*(;|$)/.test(t));
  if (ours.length !== 1) return null;
  let id: string | null = null;
  for (const field of ours[0]!.split(';')) {
    const trimmed = field.trim();
    if (trimmed === '') continue;
    const m = /^([A-Za-z0-9_.-]+)=([\x21-\x3a\x3c\x3e-\x7e]{1,})$/.exec(trimmed);
    if (!m) return null;
    // RFC 8461 §3.1: id is 1 to 32 letters and digits.
    if (m[1] === 'id') {
      if (!/^[A-Za-z0-9]{1,32}$/.test(m[2]!)) return null;
      id = m[2]!;
    }
  }
  return id;
}

export type PolicyParse = { ok: true; policy: StsPolicy } | { ok: false; error: string };

const POLICY_KEY = /^[A-Za-z0-9_-]+$/;
// What a value may not hold (a lone CR, or a Unicode line break): the lines are split at LF and CRLF only.
const LINE_TERMINATOR = /[\r\n\u2028\u2029]/;

/** `s` without the spaces and tabs (WSP) at either end, in one pass from each end. */
function trimWsp(s: string): string {
  let start = 0;
  let end = s.length;
  while (start < end && (s[start] === ' ' || s[start] === '\t')) start++;
  while (end > start && (s[end - 1] === ' ' || s[end - 1] === '\t')) end--;
  return s.slice(start, end);
}

/**
 * The policy file (RFC 8461 §3.2): `key: value` lines ended by CRLF (a bare LF is accepted, as most
 * implementations do), version STSv1, a mode, max_age, and mx lines unless the mode is none. Unknown
 * keys are ignored (§3.2: extension fields).
 */
export function parsePolicy(text: string): PolicyParse {
  let version: string | null = null;
  let mode: string | null = null;
  let maxAge: string | null = null;
  const mx: string[] = [];
  const lines: string[] = [];
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') continue;
    lines.push(line);
    // Split at the first colon and trim by hand: a regex with a lazy value between two runs of WSP backtracked
    // cubically on a line of tabs that the fetched file chooses (4 kB of them took 25 s: docs/decisions.md #66).
    const colon = line.indexOf(':');
    const key = line.slice(0, Math.max(0, colon));
    if (!POLICY_KEY.test(key) || LINE_TERMINATOR.test(line))
      return { ok: false, error: `policy line is not "key: value": ${JSON.stringify(line.slice(0, 80))}` };
    const value = trimWsp(line.slice(colon + 1));
    if (key === 'version') version ??= value;
    else if (key === 'mode') mode ??= value;
    else if (key === 'max_age') maxAge ??= value;
    else if (key === 'mx') mx.push(value.toLowerCase().replace(/\.$/, ''));
  }
  if (version !== 'STSv1') return { ok: false, error: 'policy version is not STSv1' };
  if (mode !== 'enforce' && mode !== 'testing' && mode !== 'none')
    return { ok: false, error: `policy mode ${JSON.stringify(mode)} is not enforce, testing or none` };
  if (maxAge === null || !/^\d{1,10}$/.test(maxAge) || Number(maxAge) > MAX_AGE_LIMIT_S)
    return { ok: false, error: `policy max_age ${JSON.stringify(maxAge)} is not 0 to ${MAX_AGE_LIMIT_S} seconds` };
  if (mode !== 'none' && mx.length === 0) return { ok: false, error: 'policy has no mx line' };
  const bad = mx.find((p) => !/^(\*\.)?[a-z0-9_-]+(\.[a-z0-9_-]+)+$/.test(p));
  if (bad !== undefined) return { ok: false, error: `policy mx pattern ${JSON.stringify(bad)} is not a host name` };
  return { ok: true, policy: { mode, mx, maxAgeS: Number(maxAge), lines } };
}

/**
 * RFC 8461 §4.1: a pattern is a host name, matched exactly, or `*.` and a name, where the wildcard
 * stands for exactly one leftmost label (`*.example.com` matches mx1.example.com, not
 * a.b.example.com nor example.com). Case-insensitive.
 */
export function mxMatches(pattern: string, host: string): boolean {
  const h = host.toLowerCase().replace(/\.$/, '');
  const p = pattern.toLowerCase().replace(/\.$/, '');
  if (!p.startsWith('*.')) return h === p;
  const dot = h.indexOf('.');
  return dot > 0 && h.slice(dot + 1) === p.slice(2);
}

export const policyAllows = (policy: StsPolicy, host: string) => policy.mx.some((p) => mxMatches(p, host));

/** The outcome of one policy fetch, as the fetcher reports it. */
export type FetchResult =
  | { ok: true; body: string }
  /** webpki: the policy host's certificate did not verify (RFC 8460 §4.3.2.2 sts-webpki-invalid). */
  | { ok: false; error: string; webpki?: boolean };

/** Why a domain with an `_mta-sts` record has no policy in force, as RFC 8460 §4.3.2.2 names it. */
export type StsFailure = 'sts-policy-fetch-error' | 'sts-policy-invalid' | 'sts-webpki-invalid';

export interface StsCacheOptions {
  clock: Clock;
  /** The TXT records of `_mta-sts.<domain>`; throws when DNS fails (as opposed to answering "none"). */
  txt(name: string): Promise<string[]>;
  /** GET https://mta-sts.<domain>/.well-known/mta-sts.txt, certificate verified, no redirects. */
  fetch(domain: string): Promise<FetchResult>;
  /** Domains remembered at most (the oldest are forgotten first). */
  maxEntries?: number;
}

/** What applies to one delivery: no policy (with why, for the event), or a policy and where it came from. */
export type StsLookup =
  | { policy: null; note?: string; failure?: StsFailure }
  | { policy: StsPolicy; id: string; source: 'cache' | 'fetched'; note?: string; failure?: StsFailure };

interface Entry {
  id: string;
  policy: StsPolicy;
  expiresAt: number;
}

/**
 * The policy cache (RFC 8461 §5.1). For each delivery: look up the TXT record; a cached, unexpired
 * policy with the same id is used as it is; a new id (or no cached policy, or an expired one) means a
 * fetch, whose policy replaces the cached one for max_age seconds. When the TXT record is absent or DNS
 * fails, or the fetch fails, an unexpired cached policy still applies (§5.1: an attacker who strips
 * the record or blocks the policy host must not be able to downgrade a domain we know); without one,
 * delivery goes on as if the domain had no policy.
 */
export function createStsCache(o: StsCacheOptions) {
  const entries = new Map<string, Entry>();
  const inflight = new Map<string, Promise<StsLookup>>();
  const maxEntries = o.maxEntries ?? 10_000;

  const cached = (domain: string): Entry | null => {
    const e = entries.get(domain);
    if (!e) return null;
    if (e.expiresAt <= o.clock.now()) {
      entries.delete(domain);
      return null;
    }
    return e;
  };

  async function resolve(domain: string): Promise<StsLookup> {
    let id: string | null;
    let dnsNote: string | undefined;
    try {
      id = parseStsRecord(await o.txt(`_mta-sts.${domain}`));
    } catch (err) {
      id = null;
      dnsNote = `_mta-sts.${domain} TXT lookup failed: ${(err as Error).message}`;
    }
    const have = cached(domain);
    if (id === null) {
      return have
        ? { policy: have.policy, id: have.id, source: 'cache', note: dnsNote }
        : { policy: null, note: dnsNote };
    }
    if (have && have.id === id) return { policy: have.policy, id, source: 'cache' };
    const fetched = await o.fetch(domain);
    const parsed: PolicyParse = fetched.ok ? parsePolicy(fetched.body) : { ok: false, error: fetched.error };
    if (!parsed.ok) {
      const note = `MTA-STS policy of ${domain} (id ${id}) unavailable: ${parsed.error}`;
      const failure: StsFailure = fetched.ok
        ? 'sts-policy-invalid'
        : fetched.webpki
          ? 'sts-webpki-invalid'
          : 'sts-policy-fetch-error';
      return have
        ? { policy: have.policy, id: have.id, source: 'cache', note, failure }
        : { policy: null, note, failure };
    }
    entries.delete(domain);
    // max_age 0 is a policy for this delivery only.
    if (parsed.policy.maxAgeS > 0) {
      entries.set(domain, { id, policy: parsed.policy, expiresAt: o.clock.now() + parsed.policy.maxAgeS * 1000 });
      if (entries.size > maxEntries) entries.delete(entries.keys().next().value as string);
    }
    return { policy: parsed.policy, id, source: 'fetched' };
  }

  return {
    /** The policy for deliveries to `domain` now. Never throws. Concurrent calls for a domain share one. */
    lookup(domain: string): Promise<StsLookup> {
      const key = domain.toLowerCase().replace(/\.$/, '');
      const pending = inflight.get(key);
      if (pending) return pending;
      const p = resolve(key).catch((err: Error): StsLookup => ({
        policy: null,
        note: `MTA-STS lookup failed: ${err.message}`,
      }));
      inflight.set(key, p);
      void p.finally(() => inflight.delete(key));
      return p;
    },
    /** The cached policy of a domain, if unexpired (tests, diagnostics). */
    peek: (domain: string) => cached(domain.toLowerCase()),
  };
}

export type StsCache = ReturnType<typeof createStsCache>;
