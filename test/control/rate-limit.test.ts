// docs/decisions.md #7: a token bucket per credential, burst 100, refilling 20 per second; over it,
// 429 `rate_limited` with a Retry-After header. The clock is frozen so refill happens only when the
// test advances it: the counts below are exact.
import t, { type Test } from 'tap';
import { signHeaders } from '@svc-mail/sdk';
import { randomUUID } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';

const WHOAMI = '/v1/services/whoami';

interface Cred {
  keyId: string;
  secret: string;
}

interface Res {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

async function whoami(svc: TestService, c: Cred): Promise<Res> {
  const headers = await signHeaders({
    method: 'GET',
    target: WHOAMI,
    body: '',
    keyId: c.keyId,
    secret: c.secret,
    timestamp: String(svc.clock.now()),
  });
  const res = await fetch(svc.url + WHOAMI, { headers });
  const text = await res.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = { unparsable: text };
  }
  return { status: res.status, headers: res.headers, body };
}

/** n requests in concurrent batches of `batch`; the statuses in completion-independent order. */
async function burst(svc: TestService, c: Cred, n: number, batch = 25): Promise<Res[]> {
  const out: Res[] = [];
  for (let done = 0; done < n; done += batch) {
    const size = Math.min(batch, n - done);
    out.push(...(await Promise.all(Array.from({ length: size }, () => whoami(svc, c)))));
  }
  return out;
}

const count = (rs: Res[], status: number) => rs.filter((r) => r.status === status).length;

function expect429(t: Test, res: Res, what: string): number {
  t.equal(res.status, 429, `${what}: status 429`);
  t.equal(res.body?.error?.code, 'rate_limited', `${what}: code rate_limited`);
  t.type(res.body?.error?.message, 'string', `${what}: a message`);
  t.type(res.body?.error?.requestId, 'string', `${what}: a requestId`);
  t.equal(res.headers.get('x-request-id'), res.body?.error?.requestId, `${what}: X-Request-Id equals requestId`);
  const ra = res.headers.get('retry-after');
  t.match(ra, /^\d+$/, `${what}: Retry-After is an integer number of seconds (got ${ra})`);
  t.ok(Number(ra) >= 1, `${what}: Retry-After >= 1`);
  return Number(ra);
}

t.test('token bucket per credential: burst 100, 20/s sustained', async (t) => {
  const svc = await startTestService(t);
  const a = await svc.signup();
  const b = await svc.signup();
  // A second credential of the same user: the bucket is per credential, not per user.
  const a2tok = await a.client.console.accountTokens.create({ label: 'second' });
  const a2: Cred = { keyId: a2tok.tokenId, secret: a2tok.secret };
  const A: Cred = { keyId: a.tokenId, secret: a.secret };
  const B: Cred = { keyId: b.tokenId, secret: b.secret };

  // Freeze well past the requests above, so A's bucket (touched by the create) is full again.
  svc.clock.freeze(svc.clock.now() + 60_000);

  const first = await burst(svc, A, 100);
  t.equal(count(first, 200), 100, 'the burst of 100 is accepted');
  for (const r of first.filter((x) => x.status !== 200)) t.fail(`unexpected ${r.status} ${JSON.stringify(r.body)}`);

  const over = await whoami(svc, A);
  expect429(t, over, 'request 101');

  const again = await whoami(svc, A);
  expect429(t, again, 'request 102, still no time passed');

  // Other credentials have their own buckets.
  const bRes = await burst(svc, B, 10);
  t.equal(count(bRes, 200), 10, 'another user is unaffected');
  const a2Res = await burst(svc, a2, 10);
  t.equal(count(a2Res, 200), 10, "the same user's other token is unaffected");

  // One second refills 20 tokens; the rejected requests above took none.
  svc.clock.advance(1000);
  const refill = await burst(svc, A, 30, 10);
  t.equal(count(refill, 200), 20, 'exactly 20 succeed after one second');
  t.equal(count(refill, 429), 10, 'the rest are 429');
  // Sequential, to pin the order: all 200s before any 429.
  svc.clock.advance(1000);
  const seq: number[] = [];
  for (let i = 0; i < 21; i++) seq.push((await whoami(svc, A)).status);
  t.same(seq, [...Array(20).fill(200), 429], 'sequentially: 20 accepted, then 429');

  // Retry-After is honest: waiting that long lets a request through.
  const last = await whoami(svc, A);
  const wait = expect429(t, last, 'after the refill is spent');
  svc.clock.advance(wait * 1000);
  t.equal((await whoami(svc, A)).status, 200, `accepted after Retry-After (${wait} s)`);

  // The bucket caps at the burst: a long idle period does not bank more than 100.
  svc.clock.advance(3600_000);
  const capped = await burst(svc, A, 110);
  t.equal(count(capped, 200), 100, 'after an hour idle, still only 100');
  t.equal(count(capped, 429), 10, 'the rest are 429');
});

t.test('a replayed request costs the credential owner no token', async (t) => {
  const svc = await startTestService(t);
  svc.clock.freeze();
  const me = await svc.signup();
  const c = { keyId: me.tokenId, secret: me.secret };
  const headers = await signHeaders({
    method: 'GET',
    target: WHOAMI,
    body: '',
    keyId: c.keyId,
    secret: c.secret,
    timestamp: String(svc.clock.now()),
  });
  const statuses: number[] = [];
  for (let i = 0; i < 150; i++) statuses.push((await fetch(svc.url + WHOAMI, { headers })).status);
  t.equal(statuses.filter((s) => s === 200).length, 1, 'the original is accepted once');
  t.equal(
    statuses.filter((s) => s === 401).length,
    149,
    'every replay is refused as unauthorized, none as rate limited',
  );
  // The owner still has 99 of the 100 burst tokens.
  const after = await burst(svc, c, 99);
  t.equal(count(after, 200), 99, 'the owner keeps the rest of the burst');
  expect429(t, await whoami(svc, c), 'request 101 of the owner');
});

t.test('concurrent requests of many credentials share statements and still count exactly', async (t) => {
  const svc = await startTestService(t);
  const users = await Promise.all(Array.from({ length: 3 }, () => svc.signup()));
  const creds: Cred[] = users.map((u) => ({ keyId: u.tokenId, secret: u.secret }));
  svc.clock.freeze(svc.clock.now() + 60_000);
  // 3 × 150 requests at once: batches mix credentials, and a credential's second request waits for
  // the next statement (one bucket row is never updated twice in one statement).
  const all = await Promise.all(creds.map((c) => Promise.all(Array.from({ length: 150 }, () => whoami(svc, c)))));
  for (const [i, rs] of all.entries()) {
    t.equal(count(rs, 200), 100, `credential ${i + 1}: exactly the burst of 100`);
    t.equal(count(rs, 429), 50, `credential ${i + 1}: the rest 429`);
  }
  // The same signed request 20 times at once: one is accepted, whatever batch each lands in.
  svc.clock.advance(3600_000);
  const headers = await signHeaders({
    method: 'GET',
    target: WHOAMI,
    body: '',
    keyId: creds[0]!.keyId,
    secret: creds[0]!.secret,
    timestamp: String(svc.clock.now()),
  });
  const replays = await Promise.all(
    Array.from({ length: 20 }, () => fetch(svc.url + WHOAMI, { headers }).then((r) => r.status)),
  );
  t.same(replays.filter((s) => s === 200).length, 1, 'one 200');
  t.same(replays.filter((s) => s === 401).length, 19, 'nineteen 401');
});

t.test('SVC_RATE_LIMIT_BURST and SVC_RATE_LIMIT_PER_SECOND set the default bucket', async (t) => {
  const svc = await startTestService(t, { env: { SVC_RATE_LIMIT_BURST: '5', SVC_RATE_LIMIT_PER_SECOND: '0.5' } });
  const me = await svc.signup();
  const c = { keyId: me.tokenId, secret: me.secret };
  svc.clock.freeze(svc.clock.now() + 60_000);
  t.equal(count(await burst(svc, c, 7), 200), 5, 'a burst of 5');
  // Half a token a second: the next token is two seconds away.
  t.equal(expect429(t, await whoami(svc, c), 'the 8th'), 2, 'Retry-After from the configured rate');
  svc.clock.advance(2000);
  t.equal((await whoami(svc, c)).status, 200, 'one more after two seconds');
});

t.test("an operator gives an organization's credentials a bucket of their own (bulk senders)", async (t) => {
  const svc = await startTestService(t);
  const bulk = await sender(svc);
  const other = await sender(svc);
  const B: Cred = { keyId: bulk.keyId, secret: bulk.keySecret };
  const O: Cred = { keyId: other.keyId, secret: other.keySecret };
  const admin = svc.admin();

  t.same(
    await admin.admin.organizations.rateLimit.get({ id: bulk.orgId }),
    { rateLimit: { burst: 100, perSecond: 20, custom: false } },
    'the default before',
  );
  const set = await admin.admin.organizations.rateLimit.set({ id: bulk.orgId, burst: 300, perSecond: 150 });
  t.same(set, { rateLimit: { burst: 300, perSecond: 150, custom: true } }, 'set');

  svc.clock.freeze(svc.clock.now() + 60_000);
  t.equal(count(await burst(svc, B, 320, 40), 200), 300, "the organization's key: a burst of 300");
  t.equal(count(await burst(svc, O, 120, 40), 200), 100, "another organization's key: still 100");
  svc.clock.advance(1000);
  t.equal(count(await burst(svc, B, 160, 40), 200), 150, '150 a second refilled');

  // Back to the defaults: the bucket is capped at 100 again at its next refill.
  await admin.admin.organizations.rateLimit.set({ id: bulk.orgId, burst: null, perSecond: null });
  svc.clock.advance(3600_000);
  t.equal(count(await burst(svc, B, 120, 40), 200), 100, 'cleared: 100 again');

  // Refusals: an unknown organization is 404, nonsense is 400 naming the field, a customer gets nothing.
  t.equal((await errorOf(admin.admin.organizations.rateLimit.get({ id: randomUUID() }))).status, 404, 'unknown: 404');
  const bad = await errorOf(admin.admin.organizations.rateLimit.set({ id: bulk.orgId, burst: 0, perSecond: 1 }));
  t.same([bad.status, (bad.details as { field: string }[]).map((d) => d.field)], [400, ['body.burst']], 'burst 0');
  const customer = await errorOf(
    bulk.owner.client.admin.organizations.rateLimit.set({ id: bulk.orgId, burst: 1000, perSecond: 1000 }),
  );
  t.equal(customer.status, 403, "a customer's token may not (admin routes answer 403 to customers)");
});
