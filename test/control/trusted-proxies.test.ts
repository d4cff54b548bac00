// SVC_TRUSTED_PROXIES over real sockets: X-Forwarded-For and X-Forwarded-Proto count only from a proxy the
// operator named. The service trusts 127.0.0.2 only; the test connects from 127.0.0.1 (any client) and from
// 127.0.0.2 (the proxy). The address the service took is read back from the audit log (who did what, from
// where) and from the webmail's session cookie (Secure only under https).
import t from 'tap';
import http from 'node:http';
import { webmailEnv, webmailInbox, PASSWORD } from '../helpers/webmail.js';

const e = await webmailEnv(t, { env: { SVC_TRUSTED_PROXIES: '127.0.0.2' } });
const { svc } = e;
const box = await webmailInbox(e, 'proxied');
const port = Number(new URL(svc.url).port);

function post(from: string, path: string, body: unknown, headers: Record<string, string>) {
  const data = JSON.stringify(body);
  return new Promise<http.IncomingMessage>((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path,
        method: 'POST',
        localAddress: from,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...headers },
      },
      (res) => {
        res.resume();
        resolve(res);
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

const lastAuditIp = async (action: string) =>
  (
    await svc.running.storage.db.query<{ ip: string }>(
      'SELECT ip FROM audit_log WHERE action = $1 ORDER BY created_at DESC, id DESC LIMIT 1',
      [action],
    )
  )[0]?.ip;

t.test('the client address: from the socket, unless a trusted proxy names it', async (t) => {
  const signup = (from: string, xff: string) =>
    post(
      from,
      '/auth/v1/signup',
      { email: `p-${Math.random().toString(36).slice(2)}@example.test`, password: 'a long password 1' },
      {
        'x-forwarded-for': xff,
      },
    );
  let res = await signup('127.0.0.1', '198.51.100.7');
  t.equal(res.statusCode, 200);
  t.equal(await lastAuditIp('auth.signup'), '127.0.0.1', 'a client cannot pick its address');
  svc.clock.advance(1000);
  res = await signup('127.0.0.2', '6.6.6.6, 198.51.100.7');
  t.equal(res.statusCode, 200);
  t.equal(await lastAuditIp('auth.signup'), '198.51.100.7', "the proxy's hop, not the client's own");
});

t.test('the webmail cookie is Secure only when a trusted proxy says https', async (t) => {
  const session = (from: string) =>
    post(from, '/webmail/v1/session', { address: box.address, password: PASSWORD }, { 'x-forwarded-proto': 'https' });
  const direct = await session('127.0.0.1');
  t.equal(direct.statusCode, 200);
  t.notMatch(String(direct.headers['set-cookie']), /Secure/, 'X-Forwarded-Proto from a client: ignored');
  const proxied = await session('127.0.0.2');
  t.equal(proxied.statusCode, 200);
  t.match(String(proxied.headers['set-cookie']), /^__Host-svc_webmail=.*; Secure/, 'from the trusted proxy: Secure');
});

t.test('webmail sign-in failures count per client address: the one the trusted proxy names', async (t) => {
  svc.clock.freeze();
  const fail = (client: string, i: number) =>
    post(
      '127.0.0.2',
      '/webmail/v1/session',
      { address: `nobody${i}@example.test`, password: 'wrong password' },
      {
        'x-forwarded-for': client,
      },
    );
  for (let i = 0; i < 60; i++) {
    const res = await fail('198.51.100.1', i);
    if (res.statusCode !== 401) return t.fail(`failure ${i + 1}: ${res.statusCode}`);
  }
  t.equal((await fail('198.51.100.1', 60)).statusCode, 429, 'the 61st failure from one client: throttled');
  t.equal((await fail('198.51.100.2', 61)).statusCode, 401, 'another client behind the same proxy: its own bucket');
});
