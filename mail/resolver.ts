// The DNS contract every lookup goes through (domain verification, MX resolution, mailauth):
// one object built at start from SVC_DNS_SERVERS and passed down in the Context, so tests aim it at
// a loopback DNS server and decisions stay testable (docs/conventions.md #7).

export type RecordType = 'A' | 'AAAA' | 'MX' | 'TXT' | 'CNAME' | 'NS' | 'SOA' | 'PTR' | 'TLSA';

export interface MxRecord {
  exchange: string;
  priority: number;
}

/**
 * Why a lookup found nothing: NXDOMAIN (the name does not exist), NODATA (it exists without records
 * of that type), TIMEOUT (no server answered in time), SERVFAIL (a server answered with an error).
 */
export type DnsFailure = 'NXDOMAIN' | 'NODATA' | 'TIMEOUT' | 'SERVFAIL';

export class DnsError extends Error {
  readonly failure: DnsFailure;
  /** The name looked up. */
  readonly host: string;
  readonly type: RecordType;
  constructor(failure: DnsFailure, host: string, type: RecordType) {
    // An answer, not a bug: no stack trace is captured. The MTA meets one for nearly every message (a
    // destination's cached AAAA NODATA); thrown under async frames, one cost ~11 µs with its stack and
    // ~1.4 µs without (measured in-process, Node 24).
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 0;
    super(`DNS ${type} ${host}: ${failure}`);
    Error.stackTraceLimit = limit;
    this.name = 'DnsError';
    this.failure = failure;
    this.host = host;
    this.type = type;
  }
  /** The name or the records are absent (as opposed to the lookup failing). */
  get absent(): boolean {
    return this.failure === 'NXDOMAIN' || this.failure === 'NODATA';
  }
}

/** RFC 6698 §2.1: a TLSA record (certificate usage, selector, matching type, certificate association data). */
export interface TlsaRecord {
  usage: number;
  selector: number;
  matchingType: number;
  data: Buffer;
}

/** Records with the AD bit of their answer: true when the validating resolver authenticated them (DNSSEC). */
export interface Authenticated<T> {
  records: T[];
  authenticated: boolean;
}

export interface LookupOptions {
  /** Skip the cache (verification must see what is published now). */
  fresh?: boolean;
}

export interface Resolver {
  /** TXT records, each record's strings joined (RFC 7208 §3.3: split strings are one value). */
  txt(name: string, o?: LookupOptions): Promise<string[]>;
  mx(name: string, o?: LookupOptions): Promise<MxRecord[]>;
  a(name: string, o?: LookupOptions): Promise<string[]>;
  aaaa(name: string, o?: LookupOptions): Promise<string[]>;
  /** mx() with the AD bit: DANE (RFC 7672 §2.2.1) applies only to an authenticated MX RRset. */
  mxSecure(name: string, o?: LookupOptions): Promise<Authenticated<MxRecord>>;
  /**
   * TLSA records (RFC 6698) of `name` (`_25._tcp.<mx host>`), none when absent; throws only when DNS fails.
   * `authenticated` tells a secure answer (or a secure denial) from an insecure one.
   */
  tlsa(name: string, o?: LookupOptions): Promise<Authenticated<TlsaRecord>>;
  /** The CNAME target of `name` (lower case, no trailing dot), or null when there is none. */
  cname(name: string, o?: LookupOptions): Promise<string | null>;
  /** The PTR targets of `name` (a reverse name, RFC 1035 §3.5, RFC 3596 §2.5), lower case, no trailing dot. */
  ptr(name: string, o?: LookupOptions): Promise<string[]>;
}
