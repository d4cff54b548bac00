// config/tls.ts on real files made with openssl: a certificate that cannot be used stops the start with
// one line naming the variable; a reload swaps in the new files, or fails and keeps the old ones.
import t, { type Test } from 'tap';
import { mkdtemp, rm, writeFile, copyFile, readFile } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { loadTls } from '../../config/tls.js';
import { ConfigError, loadConfig } from '../../config/load.js';
import { startService } from '../../bin/start.js';
import { selfSigned } from '../mta/mx-limits-wire.js';

async function tmp(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-tls-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** The ConfigError loadTls throws for these files; fails the test when it does not throw one. */
async function refusal(t: Test, tlsCert: string, tlsKey: string): Promise<string> {
  try {
    await loadTls({ tlsCert, tlsKey });
  } catch (err) {
    t.type(err, ConfigError);
    const lines = (err as ConfigError).problems ?? [];
    t.equal(lines.length, 1, 'one line');
    t.notMatch(lines[0], /\n|BEGIN/, 'a single line with no PEM in it');
    return lines[0] ?? '';
  }
  t.fail('loadTls did not throw');
  return '';
}

t.test('no certificate configured: null', async (t) => {
  t.equal(await loadTls({ tlsCert: null, tlsKey: null }), null);
});

t.test('a good pair loads into a SecureContext', async (t) => {
  const dir = await tmp(t);
  const a = await selfSigned(dir, 'a', 'mx.test');
  const tls = await loadTls({ tlsCert: a.cert, tlsKey: a.key });
  const c = tls!.current();
  t.ok(c.context, 'a SecureContext');
  t.equal(c.fingerprint256, new X509Certificate(await readFile(a.cert)).fingerprint256);
  t.match(c.subject, /CN=mx\.test/);
  t.ok(c.validTo.getTime() > Date.now(), 'valid until a future date');
});

t.test('each bad file gives one line naming its variable', async (t) => {
  const dir = await tmp(t);
  const a = await selfSigned(dir, 'a', 'mx.test');
  const b = await selfSigned(dir, 'b', 'other.test');
  const junk = path.join(dir, 'junk.pem');
  await writeFile(junk, 'not PEM at all\n');
  const missing = path.join(dir, 'missing.pem');

  t.match(
    await refusal(t, missing, a.key),
    /^invalid configuration: SVC_TLS_CERT .*missing\.pem: cannot be read \(ENOENT\)$/,
  );
  t.match(await refusal(t, a.cert, missing), /^invalid configuration: SVC_TLS_KEY .*missing\.pem: cannot be read/);
  t.match(await refusal(t, junk, a.key), /^invalid configuration: SVC_TLS_CERT .*junk\.pem: not a PEM certificate/);
  t.match(await refusal(t, a.cert, junk), /^invalid configuration: SVC_TLS_KEY .*junk\.pem: not a PEM private key/);
  t.match(await refusal(t, a.key, a.key), /SVC_TLS_CERT .*a\.key: not a PEM certificate/, 'the files swapped');
  t.match(
    await refusal(t, a.cert, b.key),
    /^invalid configuration: SVC_TLS_KEY .*b\.key: not the key of the certificate in SVC_TLS_CERT/,
  );
});

t.test('reload swaps in the new files, and a failed reload keeps the old certificate', async (t) => {
  const dir = await tmp(t);
  const a = await selfSigned(dir, 'a', 'mx.test');
  const b = await selfSigned(dir, 'b', 'mx2.test');
  const live = { cert: path.join(dir, 'live.crt'), key: path.join(dir, 'live.key') };
  await copyFile(a.cert, live.cert);
  await copyFile(a.key, live.key);
  const tls = (await loadTls({ tlsCert: live.cert, tlsKey: live.key }))!;
  const seen: string[] = [];
  tls.onChange((c) => seen.push(c.fingerprint256));
  const first = tls.current().fingerprint256;

  await copyFile(b.cert, live.cert);
  await copyFile(b.key, live.key);
  const next = await tls.reload();
  t.not(next.fingerprint256, first, 'a new certificate');
  t.equal(tls.current(), next, 'now current');
  t.same(seen, [next.fingerprint256], 'listeners told once');

  // A renewal caught half-way: the new certificate written, its key not yet.
  await copyFile(a.cert, live.cert);
  await t.rejects(tls.reload(), /not the key of the certificate/);
  t.equal(tls.current(), next, 'the certificate in use is kept');
  t.equal(seen.length, 1, 'listeners not told');
});

t.test('startService refuses a bad certificate before opening anything', async (t) => {
  const dir = await tmp(t);
  const junk = path.join(dir, 'junk.pem');
  await writeFile(junk, 'junk');
  const config = loadConfig({
    SVC_DATA_DIR: path.join(dir, 'data'),
    SVC_HTTP_PORT: '0',
    SVC_SMTP_PORT: '0',
    SVC_TLS_CERT: junk,
    SVC_TLS_KEY: junk,
    SVC_LOG_LEVEL: 'silent',
  });
  await t.rejects(startService(config), ConfigError);
});
