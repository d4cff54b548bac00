// The one configuration schema. Each field is one SVC_* variable of the operator contract
// (docs/configuration.md): names are stable, add freely, rename none.
// `schema` validates the raw environment string (ajv, with type coercion for numbers);
// `expect` is the sentence printed when it does not; `parse` turns the valid string into the typed value.
import os from 'node:os';
import { isIP } from 'node:net';
import { parseDuration, parseDurationList } from './durations.js';
import { HOSTNAME_PATTERN, parseHostPort, type HostPort } from '../mail/host-port.js';

// Moved to mail/ (the DNS client parses SVC_DNS_SERVERS entries too); kept importable from here.
export { parseHostPort, type HostPort };

export interface Config {
  dataDir: string;
  databaseUrl: string | null;
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
  /** null until the HTTP listener is bound: the default depends on the bound port. */
  publicUrl: string | null;
  retryDelaysMs: number[];
  masterKey: Buffer | null;
  allowPrivateWebhooks: boolean;
  /** Local addresses deliveries leave from: a default, and per sending domain (dedicated IPs). */
  sourceAddresses: SourceAddresses;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
}

export interface SourceAddresses {
  default: string | null;
  /** Sending (sub)domain, lower case → local address. */
  byDomain: Record<string, string>;
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
}

const port: JsonSchema = { type: 'integer', minimum: 0, maximum: 65535 };
const portExpect = 'must be a TCP port, an integer from 0 to 65535';
const hostname = HOSTNAME_PATTERN;

const list = (raw: string) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);

function parseSourceAddresses(raw: string): SourceAddresses {
  const out: SourceAddresses = { default: null, byDomain: {} };
  for (const item of list(raw)) {
    const eq = item.indexOf('=');
    const address = item.slice(eq + 1).trim();
    if (isIP(address) === 0) throw new Error(`not an IP address: ${address}`);
    if (eq < 0) {
      if (out.default) throw new Error('two default source addresses');
      out.default = address;
      continue;
    }
    const domain = item.slice(0, eq).trim().toLowerCase().replace(/\.$/, '');
    if (!new RegExp(hostname).test(domain)) throw new Error(`not a domain: ${domain}`);
    out.byDomain[domain] = address;
  }
  return out;
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
      '`sending-domain=address` (a dedicated IP for that domain and its subdomains). Unset: the system chooses.',
    schema: { type: 'string', format: 'source-address-list' },
    expect: 'must be a comma list of IP addresses, each optionally prefixed by `domain=` (one default at most)',
    parse: parseSourceAddresses,
    fallback: () => ({ default: null, byDomain: {} }),
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
] as const satisfies readonly Field<keyof Config>[];

export const formats: Record<string, (raw: string) => boolean> = {
  'host-port-list': (raw) => list(raw).length > 0 && list(raw).every((s) => parseHostPort(s, 53) !== null),
  'ip-list': (raw) => list(raw).every((s) => isIP(s) !== 0),
  'duration-list': (raw) => parseDurationList(raw) !== null,
  'source-address-list': (raw) => {
    try {
      parseSourceAddresses(raw);
      return true;
    } catch {
      return false;
    }
  },
  'base64-32': (raw) => /^[A-Za-z0-9+/]+={0,2}$/.test(raw) && Buffer.from(raw, 'base64').length === 32,
};

export { parseDuration };
