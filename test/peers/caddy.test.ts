// Custom webmail domains over automatic HTTPS (docs/api.md §4.4, §4.12): Debian's Caddy runs the repository's
// own config/Caddyfile in front of the service, and gets its certificates on demand from Debian's pebble (an
// ACME test CA) on loopback. A verified custom domain gets a certificate issued by pebble for its name and
// serves the webmail over https; an unverified one, and one deleted before anyone asked for it, get none (the
// TLS handshake fails); a domain deleted after its certificate was issued is still refused by the service.
// Pebble validates nothing here (PEBBLE_VA_ALWAYS_VALID): what is under test is who may ask, not ACME.
import t from 'tap';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { promisify } from 'node:util';
import { startTestService, uniqueEmail } from '../helpers/service.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { freePort } from '../helpers/postfix.js';
import { waitFor } from '../helpers/wait-for.js';
import { ROOT } from '../helpers/child.js';

const CADDY = '/usr/bin/caddy';
const PEBBLE = '/usr/bin/pebble';
const missing = [CADDY, PEBBLE].filter((f) => {
  try {
    accessSync(f, constants.X_OK);
    return false;
  } catch {
    return true;
  }
});
if (missing.length) {
  t.plan(0, `skip: ${missing.join(' and ')} not installed (.ci/run installs the caddy and pebble packages)`);
} else {
  await main();
}

async function main() {
  const run = promisify(execFile);
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-caddy-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));

  // ---- the service, with a verified, an unverified and a deleted custom domain --------------------------
  const WEBMAIL = 'webmail.caddy.test';
  const zone = await startDnsZone(t);
  const svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort, SVC_WEBMAIL_HOST: WEBMAIL } });
  const owner = await svc.signup(uniqueEmail('caddy'));
  const org = await owner.client.console.organizations.create({ name: 'Caddy test' });
  const orgId = org.organization.id;
  const domains = owner.client.console.organizations.customDomains;
  const register = async (domain: string, verify: boolean) => {
    const { customDomain } = await domains.create({ id: orgId, domain });
    if (verify) {
      zone.cname(domain, WEBMAIL);
      await domains.verify({ id: orgId, domainId: customDomain.id });
    }
    return customDomain.id;
  };
  const VERIFIED = 'mail.verified-caddy.test';
  const LATER_DELETED = 'mail.later-caddy.test';
  const PENDING = 'mail.pending-caddy.test';
  const DELETED = 'mail.deleted-caddy.test';
  await register(VERIFIED, true);
  const laterId = await register(LATER_DELETED, true);
  await register(PENDING, false);
  await domains.delete({ id: orgId, domainId: await register(DELETED, true) });

  // ---- pebble, its listener certificate made here (the package ships none) ----------------------------
  const pebbleCert = path.join(dir, 'pebble.crt');
  const pebbleKey = path.join(dir, 'pebble.key');
  await run('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    pebbleKey,
    '-out',
    pebbleCert,
    '-days',
    '2',
    '-subj',
    '/CN=pebble',
    '-addext',
    'subjectAltName=DNS:localhost,IP:127.0.0.1',
  ]);
  const [acmePort, mgmtPort, httpPort, httpsPort] = await Promise.all([freePort(), freePort(), freePort(), freePort()]);
  const pebbleConfig = path.join(dir, 'pebble.json');
  await writeFile(
    pebbleConfig,
    JSON.stringify({
      pebble: {
        listenAddress: `127.0.0.1:${acmePort}`,
        managementListenAddress: `127.0.0.1:${mgmtPort}`,
        certificate: pebbleCert,
        privateKey: pebbleKey,
        httpPort,
        tlsPort: httpsPort,
        ocspResponderURL: '',
        externalAccountBindingRequired: false,
      },
    }),
  );
  const children: ChildProcess[] = [];
  t.teardown(async () => {
    await Promise.all(
      children.map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            c.once('exit', () => resolve());
            c.kill('SIGKILL');
          }),
      ),
    );
  });
  const output = new Map<ChildProcess, string>();
  const start = (cmd: string, args: string[], env: Record<string, string>) => {
    const c = spawn(cmd, args, { cwd: dir, env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env } });
    output.set(c, '');
    const keep = (b: Buffer) => output.set(c, (output.get(c)! + b.toString()).slice(-20_000));
    c.stdout!.on('data', keep);
    c.stderr!.on('data', keep);
    children.push(c);
    return c;
  };
  const pebble = start(PEBBLE, ['-config', pebbleConfig], {
    PEBBLE_VA_ALWAYS_VALID: '1',
    PEBBLE_VA_NOSLEEP: '1',
    PEBBLE_WFE_NONCEREJECT: '0',
  });
  const ca = await readFile(pebbleCert, 'utf8');
  const get = (port: number, p: string, opts: https.RequestOptions = {}) =>
    new Promise<{ status: number; body: string; headers: Record<string, unknown> }>((resolve, reject) => {
      const req = https.get({ host: '127.0.0.1', port, path: p, ca, ...opts }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
      });
      req.on('error', reject);
      req.setTimeout(10_000, () => req.destroy(new Error(`GET ${p} timed out`)));
    });
  await waitFor(
    () =>
      get(mgmtPort, '/roots/0').then(
        (r) => r.status === 200,
        () => false,
      ),
    {
      what: `pebble on ${mgmtPort}: ${output.get(pebble)}`,
    },
  );
  // The root pebble issues certificates under (it changes with every start).
  const issuingRoot = (await get(mgmtPort, '/roots/0')).body;

  // ---- caddy, with the repository's Caddyfile ----------------------------------------------------------
  const upstream = new URL(svc.url).host;
  const caddy = start(CADDY, ['run', '--config', path.join(ROOT, 'config/Caddyfile'), '--adapter', 'caddyfile'], {
    HOME: dir,
    XDG_DATA_HOME: path.join(dir, 'data'),
    XDG_CONFIG_HOME: path.join(dir, 'config'),
    SVC_CADDY_UPSTREAM: upstream,
    SVC_WEBMAIL_HOST: WEBMAIL,
    SVC_ACME_CA: `https://127.0.0.1:${acmePort}/dir`,
    SVC_CADDY_OPTIONS: [
      `acme_ca_root ${pebbleCert}`,
      'admin off',
      'default_bind 127.0.0.1',
      `http_port ${httpPort}`,
      `https_port ${httpsPort}`,
      'skip_install_trust',
      `storage file_system ${path.join(dir, 'caddy-storage')}`,
    ].join('\n'),
  });
  await waitFor(
    () =>
      new Promise<boolean>((resolve) => {
        const s = tls.connect({
          host: '127.0.0.1',
          port: httpsPort,
          servername: 'probe.invalid',
          rejectUnauthorized: false,
        });
        s.once('secureConnect', () => (s.destroy(), resolve(true)));
        // A refused handshake (no certificate for that name) still means Caddy is listening.
        s.once('error', (err: NodeJS.ErrnoException) => resolve(err.code !== 'ECONNREFUSED'));
      }),
    { timeoutMs: 15_000, what: `caddy on ${httpsPort}: ${output.get(caddy)}` },
  );

  /** The certificate Caddy presents for `name`, verified against pebble's issuing root; or the TLS error. */
  const handshake = (name: string) =>
    new Promise<{ ok: true; cert: tls.PeerCertificate } | { ok: false; error: string }>((resolve) => {
      const s = tls.connect({ host: '127.0.0.1', port: httpsPort, servername: name, ca: issuingRoot });
      s.setTimeout(20_000, () => s.destroy(new Error('handshake timed out')));
      s.once('secureConnect', () => {
        const cert = s.getPeerCertificate();
        s.destroy();
        resolve({ ok: true, cert });
      });
      s.once('error', (err) => resolve({ ok: false, error: err.message }));
    });

  t.test('a verified custom domain gets a certificate from the CA and serves the webmail', async (t) => {
    const h = await handshake(VERIFIED);
    t.ok(h.ok, `TLS handshake for ${VERIFIED}: ${h.ok ? 'ok' : h.error}\n${output.get(caddy)}`);
    if (!h.ok) return;
    t.match(h.cert.subjectaltname, `DNS:${VERIFIED}`, 'the certificate names the domain');
    t.match(h.cert.issuer.CN, /Pebble/i, 'issued by the ACME CA (pebble)');
    const page = await get(httpsPort, '/', { servername: VERIFIED, headers: { host: VERIFIED }, ca: issuingRoot });
    t.equal(page.status, 200, 'the webmail app at / over https');
    t.match(page.headers['content-type'], /text\/html/);
    t.match(page.body, /<script type="importmap"/, 'the webmail page, through Caddy with its Host kept');
    t.match(page.headers['content-security-policy'], /default-src 'none'/, "the app's own CSP came through");
  });

  t.test("the service's own webmail host has its certificate too", async (t) => {
    const h = await waitFor(
      async () => {
        const r = await handshake(WEBMAIL);
        return r.ok ? r : null;
      },
      { timeoutMs: 20_000, what: `a certificate for ${WEBMAIL}` },
    );
    t.match(h.cert.subjectaltname, `DNS:${WEBMAIL}`);
    const page = await get(httpsPort, '/', { servername: WEBMAIL, headers: { host: WEBMAIL }, ca: issuingRoot });
    t.equal(page.status, 200);
    t.match(page.body, /<script type="importmap"/, 'the webmail there');
  });

  t.test('an unverified domain and a deleted one get no certificate', async (t) => {
    for (const name of [PENDING, DELETED, 'mail.unknown-caddy.test']) {
      const h = await handshake(name);
      t.notOk(h.ok, `${name}: no certificate (${h.ok ? 'got one' : h.error})`);
    }
  });

  t.test('a domain deleted after its certificate was issued: the service no longer serves it', async (t) => {
    const h = await handshake(LATER_DELETED);
    t.ok(h.ok, `a certificate while verified: ${h.ok ? 'ok' : h.error}`);
    const before = await get(httpsPort, '/', {
      servername: LATER_DELETED,
      headers: { host: LATER_DELETED },
      ca: issuingRoot,
    });
    t.equal(before.status, 200, 'the webmail while verified');
    await domains.delete({ id: orgId, domainId: laterId });
    // Caddy may keep the certificate it has; the service refuses the name at once.
    const after = await get(httpsPort, '/', {
      servername: LATER_DELETED,
      headers: { host: LATER_DELETED },
      ca: issuingRoot,
    });
    t.equal(after.status, 404, 'no webmail once deleted');
    t.notMatch(after.body, /importmap/);
  });

  t.test('plain http is sent to https', async (t) => {
    // node:http, since fetch does not let a caller set Host.
    const res = await new Promise<http.IncomingMessage>((resolve, reject) =>
      http
        .get({ host: '127.0.0.1', port: httpPort, path: '/inbox?x=1', headers: { host: VERIFIED } }, resolve)
        .on('error', reject),
    );
    res.resume();
    t.equal(res.statusCode, 308);
    t.equal(res.headers.location, `https://${VERIFIED}/inbox?x=1`);
  });
}
