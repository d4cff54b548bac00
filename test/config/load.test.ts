// loadConfig(env) against the operator contract (docs/configuration.md): its defaults,
// one problem line per bad variable, and describeConfig never printing a secret.
import t, { type Test } from 'tap';
import os from 'node:os';
import { randomBytes } from 'node:crypto';
import { loadConfig, describeConfig, ConfigError } from '../../config/load.js';
import { fields } from '../../config/schema.js';

const MIN = 60_000;
const HOUR = 60 * MIN;
// 1m,5m,15m,30m,1h,2h,4h,8h,16h,24h,24h,24h,16h (operator contract, SVC_RETRY_DELAYS).
const DEFAULT_RETRY_MS = [
  1 * MIN,
  5 * MIN,
  15 * MIN,
  30 * MIN,
  1 * HOUR,
  2 * HOUR,
  4 * HOUR,
  8 * HOUR,
  16 * HOUR,
  24 * HOUR,
  24 * HOUR,
  24 * HOUR,
  16 * HOUR,
];

/** Calls loadConfig and returns the ConfigError it throws; fails the test when it does not throw one. */
function configError(t: Test, env: Record<string, string>): ConfigError | null {
  try {
    loadConfig(env);
  } catch (err) {
    t.type(err, ConfigError, 'throws a ConfigError');
    return err instanceof ConfigError ? err : null;
  }
  t.fail(`loadConfig(${JSON.stringify(env)}) did not throw`);
  return null;
}

t.test('defaults match the operator contract table', async (t) => {
  const c = loadConfig({});
  t.equal(c.dataDir, './data', 'SVC_DATA_DIR');
  t.equal(c.databaseUrl, null, 'SVC_DATABASE_URL unset means the embedded database');
  t.equal(c.bindHost, '127.0.0.1', 'SVC_BIND_HOST');
  t.equal(c.httpPort, 8080, 'SVC_HTTP_PORT');
  t.equal(c.smtpPort, 2525, 'SVC_SMTP_PORT');
  t.equal(c.imapPort, 1143, 'SVC_IMAP_PORT');
  t.equal(c.platformAdminKey, null, 'SVC_PLATFORM_ADMIN_KEY unset disables the platform key');
  t.same(c.dnsServers, [], 'SVC_DNS_SERVERS unset: system resolvers');
  t.equal(c.outboundPort, 25, 'SVC_OUTBOUND_PORT');
  const host = os.hostname().toLowerCase();
  t.equal(c.hostname, host, 'SVC_HOSTNAME defaults to the os hostname');
  t.equal(c.mxHost, `mx.${host}`, 'SVC_MX_HOST');
  t.equal(c.webmailHost, `webmail.${host}`, 'SVC_WEBMAIL_HOST');
  t.same(c.webmailAddresses, [], 'SVC_WEBMAIL_ADDRESSES');
  t.equal(c.notifyFrom, `no-reply@${host}`, 'SVC_NOTIFY_FROM');
  t.equal(c.notifyName, `${host} notifications`, 'SVC_NOTIFY_NAME');
  t.equal(c.publicUrl, null, 'SVC_PUBLIC_URL: derived from the bound listener later');
  t.same(c.retryDelaysMs, DEFAULT_RETRY_MS, 'SVC_RETRY_DELAYS parses to the 13 default delays in ms');
  t.equal(c.retryDelaysMs.length, 13);
  const total = c.retryDelaysMs.reduce((a, b) => a + b, 0);
  t.ok(total > 4.5 * 24 * HOUR && total < 5.5 * 24 * HOUR, `retries span about 5 days (${total / HOUR} h)`);
  t.equal(c.masterKey, null, 'SVC_MASTER_KEY unset: generated into the data dir');
  t.equal(c.tlsCert, null, 'SVC_TLS_CERT unset: no STARTTLS');
  t.equal(c.tlsKey, null, 'SVC_TLS_KEY');
  t.equal(c.imapsPort, null, 'SVC_IMAPS_PORT unset: no implicit-TLS IMAP listener');
  t.equal(c.maxMessageBytes, 26214400, 'SVC_MAX_MESSAGE_BYTES: 25 MB');
  t.equal(c.mxMaxConnections, 500, 'SVC_MX_MAX_CONNECTIONS');
  t.equal(c.mxMaxConnectionsPerIp, 20, 'SVC_MX_MAX_CONNECTIONS_PER_IP');
  t.equal(c.mxMaxRecipients, 100, 'SVC_MX_MAX_RECIPIENTS (RFC 5321 §4.5.3.1.8)');
  t.equal(c.mxIdleTimeoutMs, 5 * MIN, 'SVC_MX_IDLE_TIMEOUT (RFC 5321 §4.5.3.2.7)');
  t.equal(c.mxSessionTimeoutMs, 10 * MIN, 'SVC_MX_SESSION_TIMEOUT');
  t.ok(Object.isFrozen(c), 'the config object is frozen');
});

t.test('host names and the notification sender derive from SVC_HOSTNAME', async (t) => {
  const c = loadConfig({ SVC_HOSTNAME: 'MTA.Example.Test.' });
  t.equal(c.hostname, 'mta.example.test', 'lower-cased, trailing dot removed');
  t.equal(c.mxHost, 'mx.mta.example.test');
  t.equal(c.webmailHost, 'webmail.mta.example.test');
  t.equal(c.notifyFrom, 'no-reply@mta.example.test');

  const own = loadConfig({
    SVC_HOSTNAME: 'mta.example.test',
    SVC_MX_HOST: 'in.example.net',
    SVC_WEBMAIL_HOST: 'mail.example.net',
    SVC_NOTIFY_FROM: 'robot@example.net',
    SVC_NOTIFY_NAME: 'Exämple Cloud',
  });
  t.equal(own.mxHost, 'in.example.net', 'an explicit SVC_MX_HOST wins');
  t.equal(own.webmailHost, 'mail.example.net', 'an explicit SVC_WEBMAIL_HOST wins');
  t.equal(own.notifyFrom, 'robot@example.net', 'an explicit SVC_NOTIFY_FROM wins');
  t.equal(own.notifyName, 'Exämple Cloud', 'an explicit SVC_NOTIFY_NAME wins');
  t.throws(() => loadConfig({ SVC_NOTIFY_NAME: 'a\r\nBcc: x@example.net' }), /SVC_NOTIFY_NAME must be/, 'no CR LF');
});

t.test('empty values count as unset', async (t) => {
  const c = loadConfig({ SVC_HTTP_PORT: '', SVC_DATABASE_URL: '  ', SVC_PLATFORM_ADMIN_KEY: '' });
  t.equal(c.httpPort, 8080);
  t.equal(c.databaseUrl, null);
  t.equal(c.platformAdminKey, null);
});

const bad: [string, string][] = [
  ['SVC_HTTP_PORT', 'abc'],
  ['SVC_HTTP_PORT', '70000'],
  ['SVC_SMTP_PORT', '-1'],
  ['SVC_DNS_SERVERS', 'not a server:xx'],
  ['SVC_DNS_SERVERS', '127.0.0.1:99999'],
  ['SVC_RETRY_DELAYS', '1m,soon'],
  ['SVC_MASTER_KEY', 'short'],
  ['SVC_DATABASE_URL', 'mysql://x'],
  ['SVC_PUBLIC_URL', 'ftp://x'],
  ['SVC_WEBMAIL_ADDRESSES', '1.2.3.4,nope'],
  ['SVC_IMAPS_PORT', '70000'],
  ['SVC_MAX_MESSAGE_BYTES', '65535'],
  ['SVC_MAX_MESSAGE_BYTES', '25MB'],
  ['SVC_MX_MAX_CONNECTIONS', '0'],
  ['SVC_MX_MAX_CONNECTIONS_PER_IP', '-1'],
  ['SVC_MX_MAX_RECIPIENTS', '99'],
  ['SVC_MX_MAX_RECIPIENTS', '1.5'],
  ['SVC_MX_IDLE_TIMEOUT', '0'],
  ['SVC_MX_SESSION_TIMEOUT', 'soon'],
  ['SVC_SOURCE_ADDRESSES', '192.0.2.1@mta_1.example.net'],
  ['SVC_SOURCE_ADDRESSES', 'shop.example=2001:db8::1@'],
];

t.test('each bad value gives exactly one problem line naming its variable', async (t) => {
  for (const [name, value] of bad) {
    t.test(`${name}=${value}`, async (t) => {
      const err = configError(t, { [name]: value });
      if (!err) return;
      t.equal(err.problems.length, 1, 'one line');
      const line = err.problems[0] ?? '';
      t.notMatch(line, /\n/, 'the problem is a single line');
      t.match(line, new RegExp(`\\b${name}\\b`), 'the line names the variable');
      // Whole names: SVC_MX_MAX_CONNECTIONS is a prefix of SVC_MX_MAX_CONNECTIONS_PER_IP.
      const others = fields.map((f) => f.env).filter((env) => env !== name && new RegExp(`\\b${env}\\b`).test(line));
      t.same(others, [], 'the line names no other variable');
      t.equal(err.message, err.problems.join('\n'), 'the message is the problem lines');
    });
  }
});

t.test('two bad variables give two lines, one per variable', async (t) => {
  const err = configError(t, { SVC_HTTP_PORT: 'abc', SVC_DNS_SERVERS: 'not a server:xx' });
  if (!err) return;
  t.equal(err.problems.length, 2);
  t.ok(
    err.problems.some((l) => /\bSVC_HTTP_PORT\b/.test(l) && !l.includes('SVC_DNS_SERVERS')),
    'a line for SVC_HTTP_PORT',
  );
  t.ok(
    err.problems.some((l) => /\bSVC_DNS_SERVERS\b/.test(l) && !l.includes('SVC_HTTP_PORT')),
    'a line for SVC_DNS_SERVERS',
  );
  // Good variables next to bad ones are not reported.
  const mixed = configError(t, { SVC_HTTP_PORT: '8081', SVC_SMTP_PORT: '99999', SVC_IMAP_PORT: 'x' });
  if (!mixed) return;
  t.equal(mixed.problems.length, 2);
  t.notOk(
    mixed.problems.some((l) => l.includes('SVC_HTTP_PORT')),
    'the good port is not reported',
  );
});

t.test('good values parse', async (t) => {
  const key = randomBytes(32);
  const c = loadConfig({
    SVC_DATA_DIR: '/var/lib/svc',
    SVC_DATABASE_URL: 'postgresql://svc@db.example.test/svc',
    SVC_BIND_HOST: '0.0.0.0',
    SVC_HTTP_PORT: '0',
    SVC_SMTP_PORT: '25',
    SVC_IMAP_PORT: '65535',
    SVC_DNS_SERVERS: '127.0.0.1:5353,[::1]:53,8.8.8.8',
    SVC_OUTBOUND_PORT: '2526',
    SVC_WEBMAIL_ADDRESSES: '192.0.2.10, 2001:db8::1',
    SVC_PUBLIC_URL: 'https://mail.example.test/',
    SVC_RETRY_DELAYS: '30s,2m,1h,1d,250ms',
    SVC_MASTER_KEY: key.toString('base64'),
    SVC_PLATFORM_ADMIN_KEY: 'a-platform-key-of-enough-length',
  });
  t.equal(c.dataDir, '/var/lib/svc');
  t.equal(c.databaseUrl, 'postgresql://svc@db.example.test/svc');
  t.equal(c.bindHost, '0.0.0.0');
  t.equal(c.httpPort, 0, 'port 0 is allowed (tests bind an ephemeral port)');
  t.equal(c.smtpPort, 25);
  t.equal(c.imapPort, 65535);
  t.same(
    c.dnsServers,
    [
      { host: '127.0.0.1', port: 5353 },
      { host: '::1', port: 53 },
      { host: '8.8.8.8', port: 53 },
    ],
    'host/port list, default port 53',
  );
  t.equal(c.outboundPort, 2526);
  t.same(c.webmailAddresses, ['192.0.2.10', '2001:db8::1']);
  t.equal(c.publicUrl, 'https://mail.example.test', 'trailing slash removed');
  t.same(c.retryDelaysMs, [30_000, 120_000, HOUR, 24 * HOUR, 250]);
  t.ok(c.masterKey && key.equals(c.masterKey), 'the master key is the decoded 32 bytes');
  t.equal(c.platformAdminKey, 'a-platform-key-of-enough-length');
  t.equal(typeof c.httpPort, 'number', 'ports are numbers, not strings');

  t.equal(
    loadConfig({ SVC_PUBLIC_URL: 'http://127.0.0.1:8080///' }).publicUrl,
    'http://127.0.0.1:8080',
    'every trailing slash',
  );
  t.equal(loadConfig({ SVC_PUBLIC_URL: 'https://x.test/base/' }).publicUrl, 'https://x.test/base', 'a path is kept');
});

t.test('describeConfig redacts every secret', async (t) => {
  const adminKey = 'platform-admin-key-' + randomBytes(8).toString('hex');
  const masterKey = randomBytes(32).toString('base64');
  const dbPassword = 'pw' + randomBytes(8).toString('hex');
  const databaseUrl = `postgres://svc:${dbPassword}@db.example.test:5432/svc`;
  const text = describeConfig(
    loadConfig({
      SVC_PLATFORM_ADMIN_KEY: adminKey,
      SVC_MASTER_KEY: masterKey,
      SVC_DATABASE_URL: databaseUrl,
      SVC_HTTP_PORT: '8181',
    }),
  );
  t.notOk(text.includes(adminKey), 'no SVC_PLATFORM_ADMIN_KEY value');
  t.notOk(text.includes(masterKey), 'no SVC_MASTER_KEY value (base64)');
  t.notOk(text.includes(Buffer.from(masterKey, 'base64').toString('hex')), 'no SVC_MASTER_KEY value (hex)');
  t.notOk(text.includes(dbPassword), 'no database password');
  t.notOk(text.includes('db.example.test'), 'no part of SVC_DATABASE_URL');
  t.match(text, /^SVC_PLATFORM_ADMIN_KEY=\(set, redacted\)$/m);
  t.match(text, /^SVC_MASTER_KEY=\(set, redacted\)$/m);
  t.match(text, /^SVC_DATABASE_URL=\(set, redacted\)$/m);
  t.match(text, /^SVC_HTTP_PORT=8181$/m, 'non-secret values are printed');
  for (const f of fields) t.match(text, new RegExp(`^${f.env}=`, 'm'), `${f.env} is listed`);

  const unset = describeConfig(loadConfig({}));
  t.match(unset, /^SVC_PLATFORM_ADMIN_KEY=\(unset\)$/m, 'an unset secret says so');
});

t.test('a rejected secret is not echoed in the problem line', async (t) => {
  // A master key one byte short, or a database URL in the wrong scheme, is still a real secret: the
  // problem line goes to stderr and the journal.
  const nearKey = randomBytes(31).toString('base64');
  const dbPassword = 'pw' + randomBytes(8).toString('hex');
  const cases: [string, string, string][] = [
    ['SVC_MASTER_KEY', nearKey, nearKey],
    ['SVC_DATABASE_URL', `mysql://svc:${dbPassword}@db.example.test/svc`, dbPassword],
    ['SVC_PLATFORM_ADMIN_KEY', 'short-secret', 'short-secret'],
  ];
  for (const [name, value, secret] of cases) {
    const err = configError(t, { [name]: value });
    if (!err) continue;
    t.equal(err.problems.length, 1);
    t.match(err.problems[0], new RegExp(`\\b${name}\\b`), `${name} is named`);
    t.notOk(err.message.includes(secret), `${name}: the value is not printed`);
  }
});

t.test('describeConfig prints DNS servers in a form SVC_DNS_SERVERS reads back', async (t) => {
  const servers = '127.0.0.1:5353,[::1]:5353';
  const text = describeConfig(loadConfig({ SVC_DNS_SERVERS: servers }));
  const printed = /^SVC_DNS_SERVERS=(.*)$/m.exec(text)?.[1] ?? '';
  t.match(printed, /^127\.0\.0\.1:5353,/, 'IPv4 as host:port');
  t.same(
    loadConfig({ SVC_DNS_SERVERS: printed }).dnsServers,
    loadConfig({ SVC_DNS_SERVERS: servers }).dnsServers,
    'the printed value parses to the same servers',
  );
});

t.test('the MX limits and the certificate settings parse', async (t) => {
  const c = loadConfig({
    SVC_TLS_CERT: '/etc/svc/mx.crt',
    SVC_TLS_KEY: '/etc/svc/mx.key',
    SVC_IMAPS_PORT: '993',
    SVC_MAX_MESSAGE_BYTES: '65536',
    SVC_MX_MAX_CONNECTIONS: '1',
    SVC_MX_MAX_CONNECTIONS_PER_IP: '1',
    SVC_MX_MAX_RECIPIENTS: '1000',
    SVC_MX_IDLE_TIMEOUT: '90',
    SVC_MX_SESSION_TIMEOUT: '1h',
  });
  t.equal(c.tlsCert, '/etc/svc/mx.crt');
  t.equal(c.tlsKey, '/etc/svc/mx.key');
  t.equal(c.imapsPort, 993);
  t.equal(c.maxMessageBytes, 65536, 'the RFC 5321 §4.5.3.1.7 minimum is allowed');
  t.equal(c.mxMaxConnections, 1);
  t.equal(c.mxMaxConnectionsPerIp, 1);
  t.equal(c.mxMaxRecipients, 1000);
  t.equal(c.mxIdleTimeoutMs, 90_000, 'a bare number is seconds');
  t.equal(c.mxSessionTimeoutMs, HOUR);
});

t.test('SVC_TLS_CERT and SVC_TLS_KEY go together; SVC_IMAPS_PORT needs them', async (t) => {
  for (const only of ['SVC_TLS_CERT', 'SVC_TLS_KEY']) {
    const err = configError(t, { [only]: '/etc/svc/x.pem' });
    if (!err) continue;
    t.equal(err.problems.length, 1, `${only} alone: one line`);
    t.match(err.problems[0], /^invalid configuration: SVC_TLS_CERT and SVC_TLS_KEY must be set together/);
    t.match(err.problems[0], new RegExp(`only ${only} is set`));
  }
  const imaps = configError(t, { SVC_IMAPS_PORT: '993' });
  t.same(imaps?.problems, ['invalid configuration: SVC_IMAPS_PORT needs a certificate (SVC_TLS_CERT and SVC_TLS_KEY)']);
  // A bad value on its own line first: the rules between variables are checked once each is valid.
  const both = configError(t, { SVC_TLS_CERT: '/x', SVC_HTTP_PORT: 'abc' });
  t.equal(both?.problems.length, 1);
  t.match(both?.problems[0], /SVC_HTTP_PORT/);
});

t.test('describeConfig prints durations with their unit, so that they read back', async (t) => {
  const c = loadConfig({ SVC_MX_SESSION_TIMEOUT: '90s', SVC_RETRY_DELAYS: '1m,250ms' });
  const text = describeConfig(c);
  const session = /^SVC_MX_SESSION_TIMEOUT=(.*)$/m.exec(text)?.[1] ?? '';
  const retries = /^SVC_RETRY_DELAYS=(.*)$/m.exec(text)?.[1] ?? '';
  t.equal(session, '90s', 'in the largest unit that writes it exactly');
  t.equal(loadConfig({ SVC_MX_SESSION_TIMEOUT: session }).mxSessionTimeoutMs, 90_000);
  t.equal(retries, '1m,250ms');
  t.match(describeConfig(loadConfig({})), /^SVC_MX_IDLE_TIMEOUT=5m$/m, 'a default as an operator writes it');
  t.same(loadConfig({ SVC_RETRY_DELAYS: retries }).retryDelaysMs, [60_000, 250]);
});

t.test('svc config prints set variables as written and source addresses in their own syntax', async (t) => {
  const env = { SVC_MX_SESSION_TIMEOUT: ' 90s ', SVC_SOURCE_ADDRESSES: '192.0.2.1,Example.COM=192.0.2.2' };
  const text = describeConfig(loadConfig(env), env);
  t.match(text, /^SVC_MX_SESSION_TIMEOUT=90s$/m);
  t.match(text, /^SVC_SOURCE_ADDRESSES=192\.0\.2\.1,Example\.COM=192\.0\.2\.2$/m);
  t.notMatch(text, /\[object Object\]/);
  // Unset: the default, printed so that it reads back; with no environment the parsed value in the same syntax.
  const parsed = describeConfig(loadConfig(env));
  const sources = /^SVC_SOURCE_ADDRESSES=(.*)$/m.exec(parsed)?.[1] ?? '';
  t.equal(sources, '192.0.2.1,example.com=192.0.2.2');
  t.same(loadConfig({ SVC_SOURCE_ADDRESSES: sources }).sourceAddresses, loadConfig(env).sourceAddresses);
  t.match(describeConfig(loadConfig({})), /^SVC_SOURCE_ADDRESSES=\(unset\)$/m);
});

t.test('SVC_SOURCE_ADDRESSES: an EHLO name per address, IPv6 too; the old syntax still reads', async (t) => {
  const sources = (raw: string) => loadConfig({ SVC_SOURCE_ADDRESSES: raw }).sourceAddresses;
  t.same(sources('192.0.2.1,shop.example=192.0.2.2'), {
    default: '192.0.2.1',
    byDomain: { 'shop.example': '192.0.2.2' },
    ehlo: {},
  });
  t.same(sources('192.0.2.1@MTA1.example.net.,Shop.Example=192.0.2.2@mta2.example.net'), {
    default: '192.0.2.1',
    byDomain: { 'shop.example': '192.0.2.2' },
    ehlo: { '192.0.2.1': 'mta1.example.net', '192.0.2.2': 'mta2.example.net' },
  });
  // RFC 5952: an IPv6 address is held in its canonical text, the one os.networkInterfaces() lists.
  t.same(sources('2001:DB8:0:0::1@mta6.example.net, news.example=2001:db8::2'), {
    default: '2001:db8::1',
    byDomain: { 'news.example': '2001:db8::2' },
    ehlo: { '2001:db8::1': 'mta6.example.net' },
  });
  // A name given once is the address's wherever it is used.
  t.same(sources('a.example=192.0.2.3@mta3.example.net,b.example=192.0.2.3').ehlo, { '192.0.2.3': 'mta3.example.net' });
});

t.test('SVC_SOURCE_ADDRESSES: a bad entry is refused with a line saying which and why', async (t) => {
  const cases: [string, RegExp][] = [
    ['192.0.2.1@mta_1.example.net', /: "mta_1\.example\.net" in "192\.0\.2\.1@mta_1\.example\.net" is not a host name/],
    ['shop.example=2001:db8::1@', /: "" in "shop\.example=2001:db8::1@" is not a host name for EHLO$/],
    ['192.0.2.1@192.0.2.9', /: "192\.0\.2\.9" in .* is not a host name for EHLO$/],
    ['mta.example.net@192.0.2.1', /: "mta\.example\.net" in "mta\.example\.net@192\.0\.2\.1" is not an IP address$/],
    ['a.example=192.0.2.1@one.example,b.example=192.0.2.1@two.example', /192\.0\.2\.1 is given two EHLO names/],
    ['192.0.2.1@a.example,192.0.2.2@b.example', /two default source addresses, 192\.0\.2\.1 and 192\.0\.2\.2$/],
    ['bad_domain=192.0.2.1@a.example', /"bad_domain" is not a domain$/],
  ];
  for (const [raw, why] of cases) {
    const err = configError(t, { SVC_SOURCE_ADDRESSES: raw });
    t.equal(err?.problems.length, 1, raw);
    t.match(err?.problems[0], /^invalid configuration: SVC_SOURCE_ADDRESSES must be a comma list of IP addresses/);
    t.match(err?.problems[0], why, raw);
  }
});

t.test('svc config prints EHLO names back in the syntax of SVC_SOURCE_ADDRESSES, and they read back', async (t) => {
  const raw =
    '192.0.2.1@MTA1.example.net,shop.example=192.0.2.2@mta2.example.net,news.example=2001:db8::1@mta6.example.net';
  const c = loadConfig({ SVC_SOURCE_ADDRESSES: raw });
  const printed = /^SVC_SOURCE_ADDRESSES=(.*)$/m.exec(describeConfig(c))?.[1] ?? '';
  t.equal(
    printed,
    '192.0.2.1@mta1.example.net,shop.example=192.0.2.2@mta2.example.net,news.example=2001:db8::1@mta6.example.net',
  );
  t.same(loadConfig({ SVC_SOURCE_ADDRESSES: printed }).sourceAddresses, c.sourceAddresses, 'reads back identically');
  // An address named in one entry and not in another is printed with its name in both: the same value.
  const shared = loadConfig({ SVC_SOURCE_ADDRESSES: '192.0.2.3@mta3.example.net,b.example=192.0.2.3' });
  const again = /^SVC_SOURCE_ADDRESSES=(.*)$/m.exec(describeConfig(shared))?.[1] ?? '';
  t.equal(again, '192.0.2.3@mta3.example.net,b.example=192.0.2.3@mta3.example.net');
  t.same(loadConfig({ SVC_SOURCE_ADDRESSES: again }).sourceAddresses, shared.sourceAddresses);
});
