// bench/lean-fetch.ts, the load generator's transport: what it writes is what it signed, with a shared body prefix
// (sharedBodyPrefix: its octets and its hash state made once) as without, non-ASCII on either side of the split
// included; a body that should hold the prefix and does not is refused, not sent as something else.
import { createHash, createHmac } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import t, { type Test } from 'tap';
import { authorizationHeader, createClient, HEADER_NONCE, HEADER_TIMESTAMP, stringToSign } from '@svc-mail/sdk';
import { closeIdle, leanFetch, leanSign, sharedBodyPrefix } from '../../bench/lean-fetch.js';
import { rawJson } from '../../bench/service.js';

const SECRET = 'a-secret-of-the-test';
const KEY_ID = 'key_test';

/** A server that keeps each request's octets and whether its signature covers them (docs/api.md §5.2). */
async function recorder() {
  const got: { body: Buffer; signed: boolean; length: number }[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const hash = createHash('sha256').update(body).digest('hex');
      const toSign = stringToSign(
        req.method!,
        req.url!,
        String(req.headers[HEADER_TIMESTAMP]),
        String(req.headers[HEADER_NONCE]),
        hash,
      );
      const sig = createHmac('sha256', SECRET).update(toSign).digest('hex');
      const signed = req.headers.authorization === authorizationHeader(KEY_ID, sig);
      got.push({ body, signed, length: Number(req.headers['content-length']) });
      // leanFetch reads an answer by its Content-Length (it reads no chunked body, nor does it need to: ours set it).
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': '10' }).end('{"id":"x"}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { url, got, close: () => new Promise((resolve) => server.close(resolve)) };
}

/** The recorder, and an SDK client on leanFetch and leanSign that calls it; gone, and the prefix unset, after `t`. */
async function setUp(t: Test) {
  const srv = await recorder();
  t.teardown(async () => {
    sharedBodyPrefix(null);
    closeIdle();
    await srv.close();
  });
  const client = createClient({
    baseUrl: srv.url,
    credential: { keyId: KEY_ID, secret: SECRET },
    fetch: leanFetch,
    sign: leanSign,
    maxRetries: 0,
  });
  return { srv, client };
}

t.test('with a shared prefix, each request is the JSON the SDK made, and its signature covers it', async (t) => {
  const { srv, client } = await setUp(t);
  // Non-ASCII in the shared text and in each message's own fields: the prefix's octets and the rest's meet at a comma.
  const body = { text: rawJson(`Grüße – ${'lorem ipsum '.repeat(500)}\n€`) };
  sharedBodyPrefix(body);
  const messages = Array.from({ length: 300 }, (_, i) => ({
    ...body,
    from: 'Bench <no-reply@example.test>',
    to: `rcpt-${i}@dest.test`,
    subject: `Ünïcode ${i}`,
  }));
  for (const m of messages) await client.v1.services.sendEmail(m as never);
  t.equal(srv.got.length, messages.length);
  for (const [i, g] of srv.got.entries()) {
    const expected = Buffer.from(JSON.stringify(messages[i]), 'utf8');
    if (!g.body.equals(expected)) t.fail(`request ${i}: the octets differ from the SDK's JSON`);
    if (!g.signed) t.fail(`request ${i}: the signature does not cover the octets sent`);
    if (g.length !== expected.length) t.fail(`request ${i}: Content-Length ${g.length}, ${expected.length} sent`);
  }
  // A short body (a tenant's set-up call) passes by the prefix.
  await client.v1.services.sendEmail({ from: 'a@example.test', to: 'b@dest.test', subject: 'é', text: 'x' } as never);
  const last = srv.got.at(-1)!;
  t.ok(last.signed, 'a body shorter than the prefix is signed as it stands');
  t.equal(
    last.body.toString('utf8'),
    JSON.stringify({ from: 'a@example.test', to: 'b@dest.test', subject: 'é', text: 'x' }),
  );
});

t.test('a long body that does not start with the shared prefix is refused when sampled, not sent', async (t) => {
  const { srv, client } = await setUp(t);
  sharedBodyPrefix({ text: 'a'.repeat(1000) });
  // The first body after the prefix is set is always compared whole.
  await t.rejects(
    client.v1.services.sendEmail({ text: 'b'.repeat(1000), to: 'x@dest.test' } as never),
    /does not start with the load's shared prefix/,
  );
  t.equal(srv.got.length, 0, 'nothing reached the server');
});
