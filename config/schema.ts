// The one configuration schema. Each field is one SVC_* variable of the operator contract
// (docs/configuration.md): names are stable, add freely, rename none.
// `schema` validates the raw environment string (ajv, with type coercion for numbers);
// `expect` is the sentence printed when it does not; `parse` turns the valid string into the typed value.
import os from 'node:os';
import { isIP } from 'node:net';
import { parseDuration, parseDurationList } from './durations.js';
import { HOSTNAME_PATTERN, parseHostPort, type HostPort } from '../mail/host-port.js';
import { isCidr } from '../mail/client-address.js';

// Moved to mail/ (the DNS client parses SVC_DNS_SERVERS entries too); kept importable from here.
export { parseHostPort, type HostPort };

export interface Config {
  dataDir: string;
  databaseUrl: string | null;
  /**
   * Processes `svc start` runs its roles in (Node's cluster module, one port each listener); 1 with the embedded
   * database, which lives inside one process (docs/decisions.md #60). null: one per core.
   */
  workers: number | null;
  blobStore: 'local' | 'postgres';
  bindHost: string;
  httpPort: number;
  smtpPort: number;
  imapPort: number;
  platformAdminKey: string | null;
  dnsServers: HostPort[];
  outboundPort: number;
  hostname: string;
  mxHost: string;
  webmailHost: string;
  webmailAddresses: string[];
  notifyFrom: string;
  /** Display name of SVC_NOTIFY_FROM in platform mail's From field. */
  notifyName: string;
  /** null until the HTTP listener is bound: the default depends on the bound port. */
  publicUrl: string | null;
  retryDelaysMs: number[];
  masterKey: Buffer | null;
  allowPrivateWebhooks: boolean;
  /** Deliver to MX hosts on loopback, private and link-local addresses (tests, closed networks). */
  allowPrivateMx: boolean;
  /** Local addresses deliveries leave from: a default, and per sending domain (dedicated IPs). */
  sourceAddresses: SourceAddresses;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** PEM certificate (chain) file the MX and IMAP listeners offer; null: no STARTTLS. Set with tlsKey. */
  tlsCert: string | null;
  /** PEM private key file of tlsCert. */
  tlsKey: string | null;
  /** Implicit-TLS IMAP port; null: no such listener. Needs tlsCert. */
  imapsPort: number | null;
  /** Largest message the MX listener takes, advertised with SIZE (RFC 1870). */
  maxMessageBytes: number;
  /** Concurrent MX connections overall. */
  mxMaxConnections: number;
  /** Concurrent MX connections from one client address (one IPv6 /64). */
  mxMaxConnectionsPerIp: number;
  /** Recipients of one MX transaction. */
  mxMaxRecipients: number;
  /** How long an MX client may stay silent while we wait for a command or data. */
  mxIdleTimeoutMs: number;
  /** How long an MX session may last at all, busy or not. */
  mxSessionTimeoutMs: number;
  /** CIDR blocks of the proxies whose X-Forwarded-For and X-Forwarded-Proto the HTTP listener believes. */
  trustedProxies: string[];
  /** Connections the HTTP listener holds at once. */
  httpMaxConnections: number;
  /** Request bodies over 1 MB read at once; more are answered 429. */
  httpMaxLargeBodies: number;
  /** Requests a credential may make at once before its bucket runs dry (docs/decisions.md #7). */
  rateLimitBurst: number;
  /** Requests a second a credential's bucket regains. */
  rateLimitPerSecond: number;
  /** Networks the platform key may be used from; empty: any. */
  platformAdminCidrs: string[];
  /** PEM file of CA certificates trusted beside the system's for MTA-STS policy fetches and MX certificates. */
  extraCaCerts: string | null;
  /** Outbound SMTP sessions open at once to one MX address. */
  maxSessionsPerHost: number;
  /** Outbound SMTP sessions open at once in all. */
  maxSessions: number;
  /** How long an MX address that refused the connection or timed out is skipped. */
  mxFailureTtlMs: number;
  /** Port of the https MTA-STS policy fetch (RFC 8461 §3.3 says 443; other values are for tests only). */
  mtaStsPort: number;
  /** The MTA role's Prometheus listener (GET /metrics); null: none (the HTTP listener serves /metrics too). */
  metricsPort: number | null;
  /** Networks GET /metrics answers (on both listeners); from anywhere else it is 404. */
  metricsCidrs: string[];
  /** Send daily SMTP TLS reports (RFC 8460) to the domains that ask for them. */
  tlsReports: boolean;
  /** organization-name of those reports (RFC 8460 §4.4). */
  tlsReportOrg: string;
  /** contact-info of those reports. */
  tlsReportContact: string;
}

export interface SourceAddresses {
  default: string | null;
  /** Sending (sub)domain, lower case → local address. */
  byDomain: Record<string, string>;
  /**
   * Local address → the EHLO name its sessions give (`address@name`, lower case); an address not here gives
   * SVC_HOSTNAME. One name per address: its PTR record names one host (docs/operations.md, Dedicated IPs).
   */
  ehlo: Record<string, string>;
}

type JsonSchema = Record<string, unknown>;

export interface Field<K extends keyof Config = keyof Config> {
  env: string;
  key: K;
  doc: string;
  schema: JsonSchema;
  expect: string;
  secret?: boolean;
  parse: (raw: string) => Config[K];
  /** Default when the variable is unset; may depend on fields listed before it. */
  fallback: (partial: Partial<Config>) => Config[K];
  /** Why a value the schema refused is wrong, when the expect line alone cannot say (which entry, which part). */
  explain?: (raw: string) => string | null;
}

const port: JsonSchema = { type: 'integer', minimum: 0, maximum: 65535 };
const count = (minimum: number): JsonSchema => ({ type: 'integer', minimum, maximum: Number.MAX_SAFE_INTEGER });
const portExpect = 'must be a TCP port, an integer from 0 to 65535';
const hostname = HOSTNAME_PATTERN;

const list = (raw: string) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

/** An IPv6 address in its canonical text (RFC 5952: lower case, zeros compressed), as os.networkInterfaces() has it. */
const canonicalAddress = (a: string): string => (isIP(a) === 6 ? new URL(`http://[${a}]`).hostname.slice(1, -1) : a);

/**
 * SVC_SOURCE_ADDRESSES: `address[@ehlo-name]` (the default) and `sending-domain=address[@ehlo-name]` entries.
 * Throws an Error whose message says which entry is wrong and why (shown after the variable's expect line).
 */
export function parseSourceAddresses(raw: string): SourceAddresses {
  const out: SourceAddresses = { default: null, byDomain: {}, ehlo: {} };
  for (const item of list(raw)) {
    const eq = item.indexOf('=');
    let address = item.slice(eq + 1).trim();
    // An IPv6 address has colons but never `@`, so the last `@` starts the EHLO name.
    const at = address.lastIndexOf('@');
    const name = at < 0 ? null : address.slice(at + 1).trim();
    if (at >= 0) address = address.slice(0, at).trim();
    if (isIP(address) === 0)
      throw new Error(`${JSON.stringify(address)} in ${JSON.stringify(item)} is not an IP address`);
    address = canonicalAddress(address);
    if (name !== null) {
      const ehlo = name.toLowerCase().replace(/\.$/, '');
      // RFC 5321 §4.1.1.1: EHLO gives the client's fully qualified domain name (or an address literal, which a
      // dedicated IP with its own PTR has no use for).
      if (!new RegExp(hostname).test(name) || isIP(ehlo) !== 0)
        throw new Error(`${JSON.stringify(name)} in ${JSON.stringify(item)} is not a host name for EHLO`);
      const had = out.ehlo[address];
      if (had && had !== ehlo) throw new Error(`${address} is given two EHLO names, ${had} and ${ehlo}`);
      out.ehlo[address] = ehlo;
    }
    if (eq < 0) {
      if (out.default) throw new Error(`two default source addresses, ${out.default} and ${address}`);
      out.default = address;
      continue;
    }
    const domain = item.slice(0, eq).trim().toLowerCase().replace(/\.$/, '');
    if (!new RegExp(hostname).test(domain)) throw new Error(`${JSON.stringify(domain)} is not a domain`);
    out.byDomain[domain] = address;
  }
  return out;
}

/** The message of what `fn` throws, or null when it does not. */
function problemOf(fn: () => unknown): string | null {
  try {
    fn();
    return null;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
}

const f = <K extends keyof Config>(field: Field<K>): Field<K> => field;

export const fields = [
  f({
    env: 'SVC_DATA_DIR',
    key: 'dataDir',
    doc: 'Directory holding the LMDB spool, the embedded database and the generated master key.',
    schema: { type: 'string', minLength: 1 },
    expect: 'must be a directory path',
    parse: (raw) => raw,
    fallback: () => './data',
  }),
  f({
    env: 'SVC_DATABASE_URL',
    key: 'databaseUrl',
    doc: 'A real Postgres (postgres://...); unset runs the embedded one (PGlite) inside the process.',
    schema: { type: 'string', pattern: '^postgres(ql)?://' },
    expect: 'must be a postgres:// or postgresql:// URL',
    secret: true,
    parse: (raw) => raw,
    fallback: () => null,
  }),
  f({
    env: 'SVC_WORKERS',
    key: 'workers',
    doc:
      'Processes `svc start` runs the roles in, sharing each port (Node cluster) and the spool; the host-wide ' +
      'caps (SVC_MAX_SESSIONS, SVC_MAX_SESSIONS_PER_HOST, SVC_MX_MAX_CONNECTIONS, SVC_HTTP_MAX_CONNECTIONS) ' +
      'are divided among them. Unset: one per core. Needs SVC_DATABASE_URL: with the embedded database one ' +
      'process runs, whatever this says.',
    schema: count(1),
    expect: 'must be a whole number of at least 1',
    parse: Number,
    // One per core, counted when `svc start` runs (bin/cluster.ts).
    fallback: () => null,
  }),
  f({
    env: 'SVC_BLOB_STORE',
    key: 'blobStore',
    doc:
      'Where inbox message bodies live: `local` (LMDB under SVC_DATA_DIR) or `postgres` (the database, so ' +
      'that hosts sharing it share mailboxes).',
    schema: { type: 'string', enum: ['local', 'postgres'] },
    expect: 'must be local or postgres',
    parse: (raw) => raw as Config['blobStore'],
    fallback: () => 'local' as const,
  }),
  f({
    env: 'SVC_BIND_HOST',
    key: 'bindHost',
    doc: 'Address every listener binds.',
    schema: { type: 'string', minLength: 1 },
    expect: 'must be an IP address or host name',
    parse: (raw) => raw,
    fallback: () => '127.0.0.1',
  }),
  f({
    env: 'SVC_HTTP_PORT',
    key: 'httpPort',
    doc: 'Control-plane HTTP API (and webmail) port.',
    schema: port,
    expect: portExpect,
    parse: Number,
    fallback: () => 8080,
  }),
  f({
    env: 'SVC_SMTP_PORT',
    key: 'smtpPort',
    doc: 'Inbound MX SMTP listener port.',
    schema: port,
    expect: portExpect,
    parse: Number,
    fallback: () => 2525,
  }),
  f({
    env: 'SVC_IMAP_PORT',
    key: 'imapPort',
    doc: 'IMAP server port.',
    schema: port,
    expect: portExpect,
    parse: Number,
    fallback: () => 1143,
  }),
  f({
    env: 'SVC_PLATFORM_ADMIN_KEY',
    key: 'platformAdminKey',
    doc: 'The platform key for bootstrap and break-glass use; unset disables it.',
    schema: { type: 'string', minLength: 16 },
    expect: 'must be at least 16 characters',
    secret: true,
    parse: (raw) => raw,
    fallback: () => null,
  }),
  f({
    env: 'SVC_DNS_SERVERS',
    key: 'dnsServers',
    doc: 'Comma list of host:port used for every DNS lookup; unset uses the system resolvers.',
    schema: { type: 'string', format: 'host-port-list' },
    expect: 'must be a comma list of host:port (for example 127.0.0.1:53,[::1]:53)',
    parse: (raw) => list(raw).map((s) => parseHostPort(s, 53) as HostPort),
    fallback: () => [],
  }),
  f({
    env: 'SVC_OUTBOUND_PORT',
    key: 'outboundPort',
    doc: 'Remote port the MTA connects to when delivering.',
    schema: { ...port, minimum: 1 },
    expect: 'must be a TCP port, an integer from 1 to 65535',
    parse: Number,
    fallback: () => 25,
  }),
  f({
    env: 'SVC_HOSTNAME',
    key: 'hostname',
    doc: "The MTA's EHLO name; also the base of the default host names below.",
    schema: { type: 'string', pattern: hostname },
    expect: 'must be a host name',
    parse: (raw) => raw.toLowerCase().replace(/\.$/, ''),
    fallback: () => os.hostname().toLowerCase(),
  }),
  f({
    env: 'SVC_MX_HOST',
    key: 'mxHost',
    doc: "Host that customers' MX records must point at.",
    schema: { type: 'string', pattern: hostname },
    expect: 'must be a host name',
    parse: (raw) => raw.toLowerCase().replace(/\.$/, ''),
    fallback: (c) => `mx.${c.hostname}`,
  }),
  f({
    env: 'SVC_WEBMAIL_HOST',
    key: 'webmailHost',
    doc: 'Host that custom webmail domains CNAME to.',
    schema: { type: 'string', pattern: hostname },
    expect: 'must be a host name',
    parse: (raw) => raw.toLowerCase().replace(/\.$/, ''),
    fallback: (c) => `webmail.${c.hostname}`,
  }),
  f({
    env: 'SVC_WEBMAIL_ADDRESSES',
    key: 'webmailAddresses',
    doc: 'Comma list of IPs an apex custom webmail domain may point at with A/AAAA records.',
    schema: { type: 'string', format: 'ip-list' },
    expect: 'must be a comma list of IPv4 or IPv6 addresses',
    parse: list,
    fallback: () => [],
  }),
  f({
    env: 'SVC_NOTIFY_FROM',
    key: 'notifyFrom',
    doc: 'Sender of platform notifications (password reset, invitations).',
    schema: { type: 'string', format: 'email' },
    expect: 'must be an email address',
    parse: (raw) => raw,
    fallback: (c) => `no-reply@${c.hostname}`,
  }),
  f({
    env: 'SVC_NOTIFY_NAME',
    key: 'notifyName',
    doc: 'Display name of platform mail\'s From (docs/operations.md, "Platform mail").',
    // No control characters: it becomes a header (RFC 5322 §2.2); non-ASCII is encoded (RFC 2047).
    schema: { type: 'string', minLength: 1, maxLength: 64, pattern: '^[^\\x00-\\x1f\\x7f]+$' },
    expect: 'must be 1 to 64 characters, none of them a control character',
    parse: (raw) => raw,
    fallback: (c) => `${c.hostname} notifications`,
  }),
  f({
    env: 'SVC_PUBLIC_URL',
    key: 'publicUrl',
    doc: 'Base URL used in links sent by mail (acceptUrl, reset link); default http://<bind>:<port>.',
    schema: { type: 'string', pattern: '^https?://[^\\s/]+' },
    expect: 'must be an http:// or https:// URL',
    parse: (raw) => raw.replace(/\/+$/, ''),
    fallback: () => null,
  }),
  f({
    env: 'SVC_RETRY_DELAYS',
    key: 'retryDelaysMs',
    doc: 'Comma list of delays between delivery attempts after a temporary failure; when exhausted the message fails.',
    schema: { type: 'string', format: 'duration-list' },
    expect: 'must be a comma list of durations such as 30s,1m,5m,1h,1d',
    parse: (raw) => parseDurationList(raw) as number[],
    // docs/decisions.md #16: about 5 days, as RFC 5321 §4.5.4.1 asks.
    fallback: () => parseDurationList('1m,5m,15m,30m,1h,2h,4h,8h,16h,24h,24h,24h,16h') as number[],
  }),
  f({
    env: 'SVC_MASTER_KEY',
    key: 'masterKey',
    doc: 'Base64 of 32 bytes that encrypts stored secrets; unset, one is generated into SVC_DATA_DIR and reused.',
    schema: { type: 'string', format: 'base64-32' },
    expect: 'must be base64 of exactly 32 bytes',
    secret: true,
    parse: (raw) => Buffer.from(raw, 'base64'),
    fallback: () => null,
  }),
  f({
    env: 'SVC_ALLOW_PRIVATE_WEBHOOKS',
    key: 'allowPrivateWebhooks',
    doc: 'Set to 1 to allow webhook URLs on loopback and private ranges (tests, closed networks).',
    schema: { type: 'string', enum: ['0', '1', 'true', 'false'] },
    expect: 'must be 0 or 1',
    parse: (raw) => raw === '1' || raw === 'true',
    fallback: () => false,
  }),
  f({
    env: 'SVC_SOURCE_ADDRESSES',
    key: 'sourceAddresses',
    doc:
      'Local IP addresses the MTA delivers from: a comma list of `address` (the default) and ' +
      '`sending-domain=address` (a dedicated IP for that domain and its subdomains), each optionally followed ' +
      'by `@ehlo-name`, the name its sessions give in EHLO (else SVC_HOSTNAME). Unset: the system chooses.',
    schema: { type: 'string', format: 'source-address-list' },
    expect:
      'must be a comma list of IP addresses, each optionally prefixed by `domain=` (one default at most) and ' +
      'followed by `@ehlo-name`',
    explain: (raw) => problemOf(() => parseSourceAddresses(raw)),
    parse: parseSourceAddresses,
    fallback: () => ({ default: null, byDomain: {}, ehlo: {} }),
  }),
  f({
    env: 'SVC_LOG_LEVEL',
    key: 'logLevel',
    doc: 'Log level: fatal, error, warn, info, debug, trace or silent.',
    schema: { type: 'string', enum: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] },
    expect: 'must be one of fatal, error, warn, info, debug, trace, silent',
    parse: (raw) => raw as Config['logLevel'],
    fallback: () => 'info' as const,
  }),
  f({
    env: 'SVC_TLS_CERT',
    key: 'tlsCert',
    doc:
      'PEM file of the certificate (leaf first, then its chain) the MX and IMAP listeners offer with STARTTLS; ' +
      'set together with SVC_TLS_KEY, reread on SIGHUP. Unset: no STARTTLS.',
    schema: { type: 'string', minLength: 1 },
    expect: 'must be the path of a PEM certificate file',
    parse: (raw) => raw,
    fallback: () => null,
  }),
  f({
    env: 'SVC_TLS_KEY',
    key: 'tlsKey',
    doc: 'PEM file of the private key of SVC_TLS_CERT; reread with it on SIGHUP.',
    schema: { type: 'string', minLength: 1 },
    expect: 'must be the path of a PEM private key file',
    parse: (raw) => raw,
    fallback: () => null,
  }),
  f({
    env: 'SVC_IMAPS_PORT',
    key: 'imapsPort',
    doc: 'Implicit-TLS IMAP listener port (RFC 8314), with the certificate of SVC_TLS_CERT; unset: none.',
    schema: port,
    expect: portExpect,
    parse: Number,
    fallback: () => null,
  }),
  f({
    env: 'SVC_MAX_MESSAGE_BYTES',
    key: 'maxMessageBytes',
    doc: 'Largest message in bytes the MX listener accepts, advertised with SIZE (RFC 1870).',
    // RFC 5321 §4.5.3.1.7: a server must take messages of at least 64K octets.
    schema: count(65536),
    expect: 'must be a number of bytes, at least 65536 (RFC 5321 §4.5.3.1.7)',
    parse: Number,
    fallback: () => 26_214_400,
  }),
  f({
    env: 'SVC_MX_MAX_CONNECTIONS',
    key: 'mxMaxConnections',
    doc: 'Concurrent connections the MX listener serves; one more is answered 421 and closed.',
    schema: count(1),
    expect: 'must be a whole number of at least 1',
    parse: Number,
    fallback: () => 500,
  }),
  f({
    env: 'SVC_MX_MAX_CONNECTIONS_PER_IP',
    key: 'mxMaxConnectionsPerIp',
    doc: 'Concurrent MX connections from one client address (IPv6: one /64); one more is answered 421 and closed.',
    schema: count(1),
    expect: 'must be a whole number of at least 1',
    parse: Number,
    fallback: () => 20,
  }),
  f({
    env: 'SVC_MX_MAX_RECIPIENTS',
    key: 'mxMaxRecipients',
    doc: 'Recipients of one MX transaction; the next RCPT is answered 452 4.5.3 and the client sends the rest later.',
    // RFC 5321 §4.5.3.1.8: a server must buffer at least 100 recipients.
    schema: count(100),
    expect: 'must be a whole number of at least 100 (RFC 5321 §4.5.3.1.8)',
    parse: Number,
    fallback: () => 100,
  }),
  f({
    env: 'SVC_MX_IDLE_TIMEOUT',
    key: 'mxIdleTimeoutMs',
    doc: 'How long an MX client may stay silent while the listener waits for a command or data before a 421.',
    schema: { type: 'string', format: 'duration' },
    expect: 'must be a duration such as 30s, 5m or 1h',
    parse: (raw) => parseDuration(raw) as number,
    // RFC 5321 §4.5.3.2.7: a server should wait at least 5 minutes for the next command.
    fallback: () => 5 * 60_000,
  }),
  f({
    env: 'SVC_MX_SESSION_TIMEOUT',
    key: 'mxSessionTimeoutMs',
    doc: 'How long one MX session may last in all, however busy, before it is closed with 421 4.4.2.',
    schema: { type: 'string', format: 'duration' },
    expect: 'must be a duration such as 30s, 5m or 1h',
    parse: (raw) => parseDuration(raw) as number,
    fallback: () => 10 * 60_000,
  }),
  f({
    env: 'SVC_MAX_SESSIONS_PER_HOST',
    key: 'maxSessionsPerHost',
    doc:
      'Outbound SMTP sessions open at once to one MX address, whatever the recipient domains it serves; more ' +
      'sends wait for one of them.',
    schema: count(1),
    expect: 'must be a whole number of at least 1',
    parse: Number,
    fallback: () => 10,
  }),
  f({
    env: 'SVC_MAX_SESSIONS',
    key: 'maxSessions',
    doc: 'Outbound SMTP sessions open at once in all; more sends wait (idle sessions are closed to make room).',
    schema: count(1),
    expect: 'must be a whole number of at least 1',
    parse: Number,
    fallback: () => 200,
  }),
  f({
    env: 'SVC_MX_FAILURE_TTL',
    key: 'mxFailureTtlMs',
    doc:
      'How long an MX address that refused the TCP connection, was unreachable or timed out before its ' +
      'greeting is skipped (the next MX host is tried at once).',
    schema: { type: 'string', format: 'duration' },
    expect: 'must be a duration such as 30s, 1m or 5m',
    parse: (raw) => parseDuration(raw) as number,
    fallback: () => 60_000,
  }),
  f({
    env: 'SVC_TRUSTED_PROXIES',
    key: 'trustedProxies',
    doc:
      'Comma list of addresses or CIDR blocks of the proxies in front of the HTTP listener (Caddy, a load ' +
      'balancer): only from these are X-Forwarded-For (the client address rate limits count) and ' +
      'X-Forwarded-Proto believed. Unset: none, the socket address is the client.',
    schema: { type: 'string', format: 'cidr-list' },
    expect: 'must be a comma list of IP addresses or CIDR blocks (10.0.0.0/8, ::1)',
    parse: list,
    fallback: () => [],
  }),
  f({
    env: 'SVC_HTTP_MAX_CONNECTIONS',
    key: 'httpMaxConnections',
    doc: 'Connections the HTTP listener holds at once; past it new ones are closed at once.',
    schema: count(1),
    expect: 'must be a whole number of at least 1',
    parse: Number,
    fallback: () => 2000,
  }),
  f({
    env: 'SVC_HTTP_MAX_LARGE_BODIES',
    key: 'httpMaxLargeBodies',
    doc: 'Request bodies over 1 MB (sendEmail with attachments, imports) read at once; more are answered 429.',
    schema: count(1),
    expect: 'must be a whole number of at least 1',
    parse: Number,
    fallback: () => 64,
  }),
  f({
    env: 'SVC_RATE_LIMIT_BURST',
    key: 'rateLimitBurst',
    doc:
      'Requests each credential (API key, token) may make in a burst; its bucket then refills at ' +
      'SVC_RATE_LIMIT_PER_SECOND. An operator may set an organization its own ' +
      '(POST /admin/v1/organizations/{id}/rate-limit).',
    schema: { type: 'integer', minimum: 1, maximum: 1_000_000 },
    expect: 'must be a whole number from 1 to 1000000',
    parse: Number,
    fallback: () => 100,
  }),
  f({
    env: 'SVC_RATE_LIMIT_PER_SECOND',
    key: 'rateLimitPerSecond',
    doc: 'Requests a second each credential may make, sustained (the refill rate of its bucket).',
    schema: { type: 'number', exclusiveMinimum: 0, maximum: 100_000 },
    expect: 'must be a number above 0 and at most 100000 (0.5 is one request every two seconds)',
    parse: Number,
    fallback: () => 20,
  }),
  f({
    env: 'SVC_PLATFORM_ADMIN_CIDRS',
    key: 'platformAdminCidrs',
    doc:
      'Comma list of addresses or CIDR blocks the platform key (SVC_PLATFORM_ADMIN_KEY) may be used from; ' +
      'from anywhere else it is refused as a wrong key. Unset: any address (every use is logged with it).',
    schema: { type: 'string', format: 'cidr-list' },
    expect: 'must be a comma list of IP addresses or CIDR blocks (10.0.0.0/8, ::1)',
    parse: list,
    fallback: () => [],
  }),
  f({
    env: 'SVC_ALLOW_PRIVATE_MX',
    key: 'allowPrivateMx',
    doc:
      'Set to 1 to deliver to MX hosts that resolve to loopback, private or link-local addresses (tests, ' +
      'closed networks). Unset, such hosts are skipped, and a domain with no other host bounces.',
    schema: { type: 'string', enum: ['0', '1', 'true', 'false'] },
    expect: 'must be 0 or 1',
    parse: (raw) => raw === '1' || raw === 'true',
    fallback: () => false,
  }),
  f({
    env: 'SVC_EXTRA_CA_CERTS',
    key: 'extraCaCerts',
    doc:
      'PEM file of CA certificates the MTA trusts in addition to the system roots, both for MTA-STS policy ' +
      'fetches (https) and for verifying MX certificates (a private CA of a closed network, or of tests).',
    schema: { type: 'string', minLength: 1 },
    expect: 'must be the path of a PEM certificate file',
    parse: (raw) => raw,
    fallback: () => null,
  }),
  f({
    env: 'SVC_MTA_STS_PORT',
    key: 'mtaStsPort',
    doc: 'Port of MTA-STS policy fetches; RFC 8461 §3.3 fixes 443, so change it only in tests.',
    schema: { ...port, minimum: 1 },
    expect: 'must be a TCP port, an integer from 1 to 65535',
    parse: Number,
    fallback: () => 443,
  }),
  f({
    env: 'SVC_METRICS_PORT',
    key: 'metricsPort',
    doc:
      "Port of the MTA role's Prometheus listener (GET /metrics, on SVC_BIND_HOST); unset: none. The HTTP " +
      'listener of the control role serves GET /metrics as well.',
    schema: port,
    expect: portExpect,
    parse: Number,
    fallback: () => null,
  }),
  f({
    env: 'SVC_METRICS_CIDRS',
    key: 'metricsCidrs',
    doc:
      'Comma list of addresses or CIDR blocks GET /metrics answers (on the HTTP and the metrics listener); ' +
      'from anywhere else, or through a proxy not named in SVC_TRUSTED_PROXIES, it is 404.',
    schema: { type: 'string', format: 'cidr-list' },
    expect: 'must be a comma list of IP addresses or CIDR blocks (10.0.0.0/8, ::1)',
    parse: list,
    fallback: () => ['127.0.0.1/8', '::1'],
  }),
  f({
    env: 'SVC_TLS_REPORTS',
    key: 'tlsReports',
    doc:
      'Set to 0 to send no SMTP TLS reports (RFC 8460). Set (the default), the MTA counts its outbound TLS ' +
      'sessions and once a day reports them to each recipient domain that publishes an _smtp._tls record.',
    schema: { type: 'string', enum: ['0', '1', 'true', 'false'] },
    expect: 'must be 0 or 1',
    parse: (raw) => raw === '1' || raw === 'true',
    fallback: () => true,
  }),
  f({
    env: 'SVC_TLS_REPORT_ORG',
    key: 'tlsReportOrg',
    doc: 'organization-name of SMTP TLS reports (RFC 8460 §4.4); default SVC_HOSTNAME.',
    schema: { type: 'string', minLength: 1, maxLength: 200, pattern: '^[\\x20-\\x7e]+$' },
    expect: 'must be 1 to 200 printable ASCII characters',
    parse: (raw) => raw,
    fallback: (c) => c.hostname!,
  }),
  f({
    env: 'SVC_TLS_REPORT_CONTACT',
    key: 'tlsReportContact',
    doc: 'contact-info of SMTP TLS reports (RFC 8460 §4.4): who a domain may write to about them.',
    schema: { type: 'string', format: 'email' },
    expect: 'must be an email address',
    parse: (raw) => raw,
    fallback: (c) => `postmaster@${c.hostname}`,
  }),
] as const satisfies readonly Field<keyof Config>[];

/**
 * Rules that tie variables together, checked once every variable is valid on its own: one line each,
 * naming the variables involved.
 */
export const crossChecks: ((c: Readonly<Config>) => string | null)[] = [
  (c) =>
    (c.tlsCert === null) !== (c.tlsKey === null)
      ? `invalid configuration: SVC_TLS_CERT and SVC_TLS_KEY must be set together (only ${
          c.tlsCert ? 'SVC_TLS_CERT' : 'SVC_TLS_KEY'
        } is set)`
      : null,
  (c) =>
    c.imapsPort !== null && c.tlsCert === null
      ? 'invalid configuration: SVC_IMAPS_PORT needs a certificate (SVC_TLS_CERT and SVC_TLS_KEY)'
      : null,
];

export const formats: Record<string, (raw: string) => boolean> = {
  'host-port-list': (raw) => list(raw).length > 0 && list(raw).every((s) => parseHostPort(s, 53) !== null),
  'ip-list': (raw) => list(raw).every((s) => isIP(s) !== 0),
  'cidr-list': (raw) => list(raw).every(isCidr),
  'duration-list': (raw) => parseDurationList(raw) !== null,
  duration: (raw) => parseDuration(raw) !== null,
  'source-address-list': (raw) => problemOf(() => parseSourceAddresses(raw)) === null,
  'base64-32': (raw) => /^[A-Za-z0-9+/]+={0,2}$/.test(raw) && Buffer.from(raw, 'base64').length === 32,
};

export { parseDuration };
