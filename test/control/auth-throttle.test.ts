// docs/decisions.md #24: the throttles of the public auth routes, over HTTP. Failed logins per account and per
// client address (a throttled guess is refused before its password is checked, a success spends nothing),
// sign-ups and `forgot` calls per client address, reset mails per account (over it `forgot` answers the same
// and sends nothing). The clock is frozen and moved by hand: the buckets refill only when the test says so.
import t from 'tap';
import type { SvcError } from '@svc-mail/sdk';
import { listNotifications } from '../../storage/pg/notification-outbox.js';
import { startTestService, uniqueEmail } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);
svc.clock.freeze();
const anon = svc.client();
const retryAfter = (e: SvcError) => (e.details as { retryAfterSeconds?: number } | undefined)?.retryAfterSeconds;

t.test('failed logins per account: 10, then one per 30 s; the right password waits too', async (t) => {
  const u = await svc.signup(uniqueEmail('guess'), 'the right password 1');
  for (let i = 0; i < 10; i++) {
    const e = await errorOf(anon.auth.login({ email: u.email, password: `wrong ${i} password` }));
    t.equal(e.status, 401, `guess ${i + 1}: 401`);
  }
  const e = await errorOf(anon.auth.login({ email: u.email.toUpperCase(), password: 'wrong again 123' }));
  t.equal(e.status, 429, 'the 11th guess, the email in another case: 429');
  t.equal(e.code, 'rate_limited');
  t.equal(retryAfter(e), 30, 'retry after the 30 s the next token takes');
  const raw = await fetch(`${svc.url}/auth/v1/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ email: u.email, password: 'wrong again 123' }),
  });
  t.equal(raw.status, 429);
  t.equal(raw.headers.get('retry-after'), '30', 'the Retry-After header');
  const right = await errorOf(anon.auth.login({ email: u.email, password: u.password }));
  t.equal(right.status, 429, 'even the right password is not checked while throttled');
  svc.clock.advance(30_000);
  t.ok((await anon.auth.login({ email: u.email, password: u.password })).accountToken, 'after 30 s: in');
  for (let i = 0; i < 12; i++) await anon.auth.login({ email: u.email, password: u.password });
  t.pass('a success spends nothing: twelve more logins');
});

t.test('failed logins per client address: 60 across accounts, then 429', async (t) => {
  svc.clock.advance(3_600_000); // a full bucket for this address again
  for (let i = 0; i < 60; i++) {
    const e = await errorOf(anon.auth.login({ email: uniqueEmail('nobody'), password: 'some password 1' }));
    if (e.status !== 401) return t.fail(`guess ${i + 1}: ${e.status}`);
  }
  const e = await errorOf(anon.auth.login({ email: uniqueEmail('nobody'), password: 'some password 1' }));
  t.equal(e.status, 429, 'the 61st failure from one address');
  t.equal(retryAfter(e), 1);
  svc.clock.advance(3_600_000);
});

t.test('reset mail: at most 3 an hour per account, the answer unchanged', async (t) => {
  const u = await svc.signup(uniqueEmail('bomb'), 'reset target pass 1');
  for (let i = 0; i < 6; i++) t.strictSame(await anon.auth.password.forgot({ email: u.email }), { ok: true });
  const mails = await listNotifications(svc.running.storage.db, { recipient: u.email });
  t.equal(mails.length, 3, 'three mails, not six');
  svc.clock.advance(20 * 60_000);
  await anon.auth.password.forgot({ email: u.email });
  t.equal((await listNotifications(svc.running.storage.db, { recipient: u.email })).length, 4, 'one more 20 min later');
});

t.test('forgot calls per client address: 30, then one per 10 s', async (t) => {
  svc.clock.advance(3_600_000);
  for (let i = 0; i < 30; i++) await anon.auth.password.forgot({ email: uniqueEmail('none') });
  const e = await errorOf(anon.auth.password.forgot({ email: uniqueEmail('none') }));
  t.equal(e.status, 429);
  t.equal(retryAfter(e), 10);
  svc.clock.advance(10_000);
  t.strictSame(await anon.auth.password.forgot({ email: uniqueEmail('none') }), { ok: true });
});

t.test('sign-ups per client address: 100, then one per 10 s', async (t) => {
  svc.clock.advance(3_600_000);
  // The signups above spent some: drain what is left, then one more is refused.
  let refused = null;
  for (let i = 0; i < 101 && !refused; i++) {
    const e = await errorOf(anon.auth.signup({ email: uniqueEmail('flood'), password: 'flood password 1' })).catch(
      () => null,
    );
    if (e && e.status === 429) refused = e;
  }
  t.ok(refused, 'refused within 101 sign-ups');
  t.equal(refused && retryAfter(refused), 10);
  svc.clock.advance(10_000);
  t.ok((await anon.auth.signup({ email: uniqueEmail('after'), password: 'after password 1' })).user, 'then one more');
});

t.test('a reset with a token that cannot work is refused', async (t) => {
  const e = await errorOf(anon.auth.password.reset({ token: 'x'.repeat(43), password: 'new password 123' }));
  t.equal(e.status, 401);
});

t.test('concurrent guesses cannot share one token: each takes its own before the password is checked', async (t) => {
  svc.clock.advance(3_600_000);
  const u = await svc.signup(uniqueEmail('race'), 'the right password 1');
  for (let i = 0; i < 9; i++) await errorOf(anon.auth.login({ email: u.email, password: `wrong ${i} password` }));
  // One token left in the account's bucket, twenty guesses at once.
  const results = await Promise.all(
    Array.from({ length: 20 }, (_, i) => errorOf(anon.auth.login({ email: u.email, password: `burst ${i} pass` }))),
  );
  t.equal(results.filter((e) => e.status === 401).length, 1, 'one guess checked');
  t.equal(results.filter((e) => e.status === 429).length, 19, 'nineteen refused unchecked');
  svc.clock.advance(3_600_000);
});

t.test('behind a trusted proxy, an IPv6 client is counted per /64', async (t) => {
  const proxied = await startTestService(t, { env: { SVC_TRUSTED_PROXIES: '127.0.0.1' } });
  proxied.clock.freeze();
  const login = (from: string) =>
    fetch(`${proxied.url}/auth/v1/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-forwarded-for': from },
      body: JSON.stringify({ email: uniqueEmail('v6'), password: 'some password 1' }),
    });
  // 60 failures, each from another address of one /64: the host cannot rotate past its bucket.
  for (let i = 0; i < 60; i++) {
    const r = await login(`2001:db8:7:7::${(i + 1).toString(16)}`);
    if (r.status !== 401) return t.fail(`guess ${i + 1}: ${r.status}`);
  }
  const refused = await login('2001:db8:7:7:ffff:ffff:ffff:1');
  t.equal(refused.status, 429, 'the 61st, from yet another address of the /64');
  t.equal(refused.headers.get('retry-after'), '1');
  t.equal((await login('2001:db8:7:8::1')).status, 401, 'the next /64 has a bucket of its own');
});
