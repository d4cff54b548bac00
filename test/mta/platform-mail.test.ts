// Platform mail authenticated as the notify domain (docs/operations.md, "Platform mail"), end to end on loopback:
// a service with its MTA, a DNS zone publishing the platform DKIM records (as storage gives them, the ones
// `svc doctor --platform` prints) and an SMTP sink as the MX of the recipient's domain. A password reset arrives
// signed with both platform keys of the notify domain (python3-dkim verifies them), with Auto-Submitted (RFC 3834
// §5), the display name and the return path on the notify domain; the start-up warns of http links and of the DKIM
// record not yet published. Then `svc doctor --platform` in a child process: exit 1 naming the DMARC record the
// zone lacks, exit 0 once it is published.
import t from 'tap';
import { spawn } from 'node:child_process';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import pino from 'pino';
import type { TestService } from '../helpers/service.js';
import type { DnsZone } from '../helpers/dns-zone.js';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { waitFor } from '../helpers/wait-for.js';
import { verifyDkim } from '../helpers/dkim-verify.js';
import { platformKeys, type PlatformKey } from '../../storage/platform-dkim.js';
import { platformDmarcValue } from '../../bin/doctor.js';
import { FROM_SOURCES } from '../helpers/from-sources.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** The test service's SVC_HOSTNAME; SVC_NOTIFY_FROM defaults to no-reply@ it, so it is the notify domain too. */
const HOST = 'mta.test';

const chunks = (value: string, size = 255) =>
  Array.from({ length: Math.ceil(value.length / size) }, (_, i) => value.slice(i * size, (i + 1) * size));

function doctorPlatform(
  svc: TestService,
  zone: DnsZone,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SVC_')) env[k] = v;
  Object.assign(env, {
    SVC_DATA_DIR: svc.dataDir,
    SVC_DNS_SERVERS: zone.hostPort,
    SVC_HOSTNAME: HOST,
    SVC_LOG_LEVEL: 'warn',
    ...(svc.databaseUrl ? { SVC_DATABASE_URL: svc.databaseUrl } : {}),
  });
  const child = spawn(process.execPath, [...FROM_SOURCES, 'bin/svc.ts', 'doctor', '--platform'], {
    cwd: ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  const killer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.on('close', (code) => {
      clearTimeout(killer);
      resolve({ code, stdout, stderr });
    }),
  );
}

t.test('platform mail: signed by the notify domain, Auto-Submitted, display name, return path; doctor', async (t) => {
  const logs: { level: number; msg: string }[] = [];
  const log = pino(
    { level: 'warn' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line));
        done();
      },
    }),
  );
  const { zone, sink, svc } = await deliveryWorld(t, { log });
  zone.mx('people.test', 10, 'mx.people.test').a('mx.people.test', '127.0.0.1');
  const db = svc.running.storage.db;

  // The MTA makes the keys at its first start; the zone had none of them then.
  let keys: PlatformKey[] = [];
  await waitFor(async () => (keys = await platformKeys(db, HOST)).length === 2, { what: 'platform keys made' });
  t.same(
    keys.map((k) => [k.algorithm, k.host]),
    [
      ['rsa', `svc1._domainkey.${HOST}`],
      ['ed25519', `svc1e._domainkey.${HOST}`],
    ],
    'an RSA and an Ed25519 key of the notify domain, at fixed selectors',
  );
  await waitFor(() => logs.some((l) => /platform DKIM record of mta\.test not found/.test(l.msg)), {
    what: 'the start-up warning of the unpublished DKIM record',
  });
  t.ok(
    logs.some((l) => /SVC_PUBLIC_URL is unset or not https/.test(l.msg)),
    'a warning that links in platform mail are http',
  );
  const published: Record<string, string> = {};
  for (const k of keys) {
    zone.txt(k.host, ...chunks(k.txt));
    published[k.host] = k.txt;
  }

  const user = await svc.signup(`reset-${Date.now()}@people.test`);
  await svc.client().auth.password.forgot({ email: user.email });
  const [m] = await sink.waitForMessages(1, 20_000);
  t.same(m!.rcptTo, [user.email]);
  t.equal(m!.mailFrom, `bounces@${HOST}`, 'the return path is on the notify domain');
  const head = m!.raw.toString('latin1').split('\r\n\r\n')[0]!;
  t.match(head, /^Auto-Submitted: auto-generated\r$/m, 'Auto-Submitted: auto-generated (RFC 3834 §5)');
  t.match(
    head,
    /^From: "mta\.test notifications" <no-reply@mta\.test>\r$/m,
    'From has the display name (quoted: "." is no atext, RFC 5322 §3.2.3)',
  );
  t.match(m!.raw.toString(), /reset/i);
  const { signatures } = await verifyDkim(m!.raw, published);
  t.same(
    signatures.map((s) => ({ domain: s.domain, selector: s.selector, algorithm: s.algorithm, ok: s.ok })),
    [
      { domain: HOST, selector: 'svc1', algorithm: 'rsa-sha256', ok: true },
      { domain: HOST, selector: 'svc1e', algorithm: 'ed25519-sha256', ok: true },
    ],
    `python3-dkim: both platform signatures pass (${JSON.stringify(signatures.map((s) => s.error ?? 'ok'))})`,
  );

  // doctor reads the database in a process of its own: the service lets go of it first (embedded PGlite).
  await svc.running.stop();
  zone.txt(HOST, `v=spf1 include:_spf.${HOST} ~all`);
  zone.txt(`_spf.${HOST}`, `v=spf1 a:${HOST} -all`);
  zone.a(HOST, '127.0.0.1').ptr('127.0.0.1', HOST);

  await t.test('svc doctor --platform: the DMARC record missing, exit 1', async (t) => {
    const run = await doctorPlatform(svc, zone);
    t.equal(run.code, 1, `exit 1 (stderr: ${run.stderr})`);
    const line = (re: RegExp) => run.stdout.split('\n').find((l) => re.test(l)) ?? '(no line)';
    t.match(
      line(/_dmarc\.mta\.test/),
      new RegExp(`^ {2}MISSING +DMARC +TXT _dmarc\\.mta\\.test {2}"${platformDmarcValue.replace(/[.;]/g, '\\$&')}"`),
      'the DMARC line: MISSING, with the value to publish',
    );
    for (const k of keys) t.match(line(new RegExp(k.host.replace(/\./g, '\\.'))), /^ {2}OK +DKIM/, `${k.host} OK`);
    t.match(line(/ TXT mta\.test /), /^ {2}OK +SPF /, 'SPF of the notify domain OK');
    t.match(line(/ TXT _spf\.mta\.test /), /^ {2}OK +operator SPF /, 'the operator SPF record OK');
    t.match(
      line(/in-addr\.arpa/),
      /^ {2}OK +PTR \(FCrDNS\) +PTR 1\.0\.0\.127\.in-addr\.arpa {2}mta\.test/,
      'FCrDNS OK',
    );
    t.match(run.stdout, /5 of 6 records right\. Publish the records marked MISSING or WRONG/);
  });

  await t.test('svc doctor --platform: every record right, exit 0; a wrong DKIM key, exit 1', async (t) => {
    zone.txt(`_dmarc.${HOST}`, 'v=DMARC1; p=reject');
    const run = await doctorPlatform(svc, zone);
    t.equal(run.code, 0, `exit 0 (stdout: ${run.stdout} stderr: ${run.stderr})`);
    t.match(run.stdout, /6 of 6 records right\.$/m);
    zone.remove(keys[0]!.host).txt(keys[0]!.host, 'v=DKIM1; k=rsa; p=AAAA');
    const wrong = await doctorPlatform(svc, zone);
    t.equal(wrong.code, 1);
    t.match(
      wrong.stdout,
      /^ {2}WRONG +DKIM +TXT svc1\._domainkey\.mta\.test {2}"v=DKIM1; k=rsa; p=.*\(found "v=DKIM1/m,
    );
  });
});
