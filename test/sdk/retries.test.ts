// The SDK's timeouts, cancellation and retries, against a loopback HTTP server that answers what each test
// scripts (a 429 with Retry-After, a 503, a dropped connection, silence) and records every request it got:
// a retriable call is sent again, re-signed with a fresh nonce each time, and succeeds; a POST without an
// idempotencyKey and any 4xx other than 429 are never sent twice.
import t, { type Test } from 'tap';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { createClient, retryAfterMs, SvcError, type ClientOptions } from '@svc-mail/sdk';

interface Seen {
  method: string;
  url: string;
  nonce: string;
  timestamp: string;
  authorization: string;
  body: string;
}

/** What the server does with the nth request (0-based): answer, or drop the connection, or never answer. */
type Script = (
  n: number,
  req: Seen,
) => { status: number; headers?: Record<string, string>; body?: unknown } | 'drop' | 'hang';

async function server(t: Test, script: Script) {
  const seen: Seen[] = [];
  const hanging = new Set<http.ServerResponse>();
  const srv = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const s: Seen = {
        method: req.method ?? '',
        url: req.url ?? '',
        nonce: String(req.headers['x-svc-nonce'] ?? ''),
        timestamp: String(req.headers['x-svc-timestamp'] ?? ''),
        authorization: String(req.headers.authorization ?? ''),
        body: Buffer.concat(chunks).toString('utf8'),
      };
      const what = script(seen.length, s);
      seen.push(s);
      if (what === 'drop') return req.socket.destroy();
      if (what === 'hang') return void hanging.add(res);
      res.writeHead(what.status, { 'content-type': 'application/json', ...what.headers });
      res.end(what.body === undefined ? '' : JSON.stringify(what.body));
    });
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        srv.closeAllConnections();
        srv.close(() => resolve());
      }),
  );
  const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  return { url, seen, hanging };
}

const OK = { status: 200, body: { principal: 'platform_admin' } };
const SENT = { status: 200, body: { providerMessageId: 'm1', status: 'queued' } };
const envelope = (code: string, message = code) => ({ error: { code, message, requestId: 'req-1' } });
const MESSAGE = { to: 'a@example.test', from: 'b@example.test', subject: 'Hi', text: 'Hello' };

/** A signed client with quick backoff (the tests wait milliseconds, not seconds). */
const client = (url: string, over: Partial<ClientOptions> = {}) =>
  createClient({ baseUrl: url, credential: { keyId: 'svc_test', secret: 'a secret' }, retryBaseMs: 5, ...over });

const nonces = (seen: Seen[]) => new Set(seen.map((s) => s.nonce)).size;

t.test('429 with Retry-After in seconds, then 200: retried after the wait, re-signed', async (t) => {
  const { url, seen } = await server(t, (n) =>
    n === 0 ? { status: 429, headers: { 'retry-after': '1' }, body: envelope('rate_limited') } : OK,
  );
  const started = Date.now();
  t.same(await client(url).v1.services.whoami(), { principal: 'platform_admin' });
  t.ok(Date.now() - started >= 950, `waited Retry-After (${Date.now() - started} ms)`);
  t.equal(seen.length, 2, 'two attempts');
  t.equal(nonces(seen), 2, 'each attempt has its own nonce');
  t.not(seen[0]!.authorization, seen[1]!.authorization, 'and its own signature');
  t.ok(Number(seen[1]!.timestamp) >= Number(seen[0]!.timestamp) + 950, 'and a new timestamp');
});

t.test('Retry-After as an HTTP date (RFC 9110 §10.2.3)', async (t) => {
  const at = new Date(Math.ceil((Date.now() + 1500) / 1000) * 1000);
  const { url, seen } = await server(t, (n) =>
    n === 0 ? { status: 429, headers: { 'retry-after': at.toUTCString() }, body: envelope('rate_limited') } : OK,
  );
  await client(url).v1.services.whoami();
  t.equal(seen.length, 2);
  t.ok(Date.now() >= at.getTime() - 50, 'waited until the date');
  t.equal(retryAfterMs('120', 0), 120_000);
  t.equal(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 4000), 6000);
  t.equal(retryAfterMs('Thu, 01 Jan 1970 00:00:10 GMT', 20_000), 0, 'a date past is no wait');
  t.equal(retryAfterMs('soon', 0), undefined);
  t.equal(retryAfterMs(null, 0), undefined);
});

t.test('503, then 200; and two 503s then 200 within the default two retries', async (t) => {
  const once = await server(t, (n) => (n === 0 ? { status: 503, body: envelope('internal') } : OK));
  t.same(await client(once.url).v1.services.whoami(), { principal: 'platform_admin' });
  t.equal(once.seen.length, 2);
  const twice = await server(t, (n) => (n < 2 ? { status: 503, body: envelope('internal') } : OK));
  await client(twice.url).v1.services.whoami();
  t.equal(twice.seen.length, 3);
  t.equal(nonces(twice.seen), 3, 'a fresh nonce for each');
});

t.test('the retries run out: the last failure is thrown; maxRetries per client and per call', async (t) => {
  const { url, seen } = await server(t, () => ({ status: 500, body: envelope('internal', 'boom') }));
  const e = await client(url)
    .v1.services.whoami()
    .catch((e: unknown) => e);
  t.ok(e instanceof SvcError);
  t.match(e, { status: 500, code: 'internal', message: 'boom', requestId: 'req-1' });
  t.equal(seen.length, 3, 'the first attempt and two retries');
  await client(url, { maxRetries: 0 })
    .v1.services.whoami()
    .catch(() => {});
  t.equal(seen.length, 4, 'maxRetries 0: one attempt');
  await client(url)
    .v1.services.whoami(undefined, { maxRetries: 4 })
    .catch(() => {});
  t.equal(seen.length, 9, 'per call: five attempts');
});

t.test('a dropped connection, then 200: retried', async (t) => {
  const { url, seen } = await server(t, (n) => (n === 0 ? 'drop' : OK));
  t.same(await client(url).v1.services.whoami(), { principal: 'platform_admin' });
  t.equal(seen.length, 2);
  t.equal(nonces(seen), 2);
  const always = await server(t, () => 'drop');
  const e = await client(always.url, { maxRetries: 1 })
    .v1.services.whoami()
    .catch((e: unknown) => e);
  t.match(e, { name: 'SvcError', status: 0, code: 'network_error' }, 'no answer at all: network_error');
  t.ok((e as SvcError).cause, 'with its cause');
  t.equal(always.seen.length, 2);
});

t.test('sendEmail: without an idempotencyKey a 503 is not retried; with one it is, the key unchanged', async (t) => {
  const { url, seen } = await server(
    t, // The first attempt of each call is refused: 0 (the keyless call), then 1, 3, 5; their retries 2, 4, 6 succeed.
    (n) => (n === 0 || n % 2 === 1 ? { status: 503, body: envelope('internal') } : SENT),
  );
  const c = client(url);
  const e = await c.v1.services.sendEmail(MESSAGE).catch((e: unknown) => e);
  t.match(e, { status: 503 }, 'the 503 is the answer');
  t.equal(seen.length, 1, 'sent once');

  t.same(await c.v1.services.sendEmail({ ...MESSAGE, idempotencyKey: 'order-1234-confirmation' }), SENT.body);
  t.equal(seen.length, 3, 'sent again after the 503');
  t.equal(seen[1]!.body, seen[2]!.body, 'the same body, key included');
  t.equal(JSON.parse(seen[2]!.body).idempotencyKey, 'order-1234-confirmation');
  t.not(seen[1]!.nonce, seen[2]!.nonce, 'a fresh nonce');

  // idempotencyKey 'auto' per call: one UUID, made before the first attempt, carried by every retry.
  await c.v1.services.sendBatch({ messages: [MESSAGE] }, { idempotencyKey: 'auto' });
  t.equal(seen.length, 5);
  const key = JSON.parse(seen[3]!.body).idempotencyKey;
  t.match(key, /^[0-9a-f-]{36}$/, 'a UUID');
  t.equal(JSON.parse(seen[4]!.body).idempotencyKey, key, 'the same key on the retry');

  // ... and for the whole client.
  await client(url, { idempotencyKey: 'auto' }).v1.services.sendEmail(MESSAGE);
  t.equal(seen.length, 7, 'retried');
  t.equal(JSON.parse(seen[5]!.body).idempotencyKey, JSON.parse(seen[6]!.body).idempotencyKey);
  t.notOk('idempotencyKey' in JSON.parse(seen[0]!.body), 'never added unasked');
});

t.test('a POST without a key is not retried after a dropped connection either', async (t) => {
  const { url, seen } = await server(t, (n) => (n === 0 ? 'drop' : SENT));
  const e = await client(url)
    .v1.services.sendEmail(MESSAGE)
    .catch((e: unknown) => e);
  t.match(e, { code: 'network_error' });
  t.equal(seen.length, 1);
});

t.test('4xx other than 429 is never retried; nor is 429 quota_exceeded', async (t) => {
  for (const [status, code] of [
    [400, 'invalid_request'],
    [401, 'unauthorized'],
    [404, 'not_found'],
    [409, 'conflict'],
    [429, 'quota_exceeded'],
  ] as const) {
    const { url, seen } = await server(t, () => ({ status, body: envelope(code) }));
    const e = await client(url)
      .v1.services.whoami()
      .catch((e: unknown) => e);
    t.match(e, { status, code }, `${status} ${code} thrown`);
    t.equal(seen.length, 1, `${status} ${code}: one attempt`);
  }
});

t.test('the timeout fires when the server never answers', async (t) => {
  const { url, seen } = await server(t, () => 'hang');
  const started = Date.now();
  const e = await client(url, { timeoutMs: 300 })
    .v1.services.whoami()
    .catch((e: unknown) => e);
  const took = Date.now() - started;
  t.ok(e instanceof SvcError);
  t.match(e, { status: 0, code: 'timeout', message: /GET \/v1\/services\/whoami: no answer within 300 ms/ });
  t.ok(took >= 290 && took < 3000, `gave up after ${took} ms`);
  t.equal(seen.length, 1, 'a timed-out call is not retried: its time is up');

  // Per call, overriding the client's.
  const per = Date.now();
  const e2 = await client(url)
    .v1.services.whoami(undefined, { timeoutMs: 200 })
    .catch((e: unknown) => e);
  t.match(e2, { code: 'timeout', message: /within 200 ms/ });
  t.ok(Date.now() - per < 3000);
});

t.test('the timeout covers the retries: a Retry-After past it ends the call at once with the 429', async (t) => {
  const { url, seen } = await server(t, () => ({
    status: 429,
    headers: { 'retry-after': '60' },
    body: envelope('rate_limited'),
  }));
  const started = Date.now();
  const e = await client(url, { timeoutMs: 2000 })
    .v1.services.whoami()
    .catch((e: unknown) => e);
  t.match(e, { status: 429, code: 'rate_limited' });
  t.ok(Date.now() - started < 1000, 'no pointless wait');
  t.equal(seen.length, 1);
});

t.test('an aborted signal stops the call, also between retries', async (t) => {
  const { url, seen } = await server(t, () => 'hang');
  const ctl = new AbortController();
  const pending = client(url)
    .v1.services.whoami(undefined, { signal: ctl.signal })
    .catch((e: unknown) => e);
  while (seen.length === 0) await new Promise((r) => setTimeout(r, 10));
  ctl.abort(new Error('user went away'));
  t.match(await pending, { message: 'user went away' }, "rejects with the signal's reason");

  const before = Date.now();
  const e = await client(url)
    .v1.services.whoami(undefined, { signal: AbortSignal.abort() })
    .catch((e: unknown) => e);
  t.match(e, { name: 'AbortError' }, 'an already aborted signal: nothing sent');
  t.equal(seen.length, 1);
  t.ok(Date.now() - before < 1000);

  const slow = await server(t, () => ({ status: 503, headers: { 'retry-after': '30' }, body: envelope('internal') }));
  const ctl2 = new AbortController();
  const waiting = client(slow.url, { timeoutMs: 60_000 })
    .v1.services.whoami(undefined, { signal: ctl2.signal })
    .catch((e: unknown) => e);
  while (slow.seen.length === 0) await new Promise((r) => setTimeout(r, 10));
  setTimeout(() => ctl2.abort(), 50);
  const at = Date.now();
  t.match(await waiting, { name: 'AbortError' }, 'aborted during the wait before a retry');
  t.ok(Date.now() - at < 2000);
  t.equal(slow.seen.length, 1, 'no retry after the abort');
});
