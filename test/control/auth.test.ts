// docs/api.md §4.2 (signup, login, logout), §4.12 (whoami), §1 rule 4 (health); docs/decisions.md #1 and #12.
// Password flows are in auth-password.test.ts, account-token routes in auth-tokens.test.ts.
import t from 'tap';
import { SvcError } from '@svc-mail/sdk';
import { startTestService, uniqueEmail } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The SvcError a call fails with; a call that succeeds fails the test. */
const fields = (e: SvcError) => ((e.details ?? []) as { field?: string }[]).map((d) => d.field);

t.test('signup returns the user and a working account token', async (t) => {
  const email = uniqueEmail('signup');
  const before = svc.clock.now();
  const res = await svc.client().auth.signup({ email, password: 'a good long password' });
  const after = svc.clock.now();

  t.strictSame(Object.keys(res).sort(), ['accountToken', 'user'], 'only user and accountToken');
  t.strictSame(
    Object.keys(res.user).sort(),
    ['created_at', 'email', 'email_verified_at', 'id', 'role', 'updated_at'],
    'user fields, no password hash',
  );
  t.match(res.user.id, UUID_RE);
  t.equal(res.user.email, email);
  t.equal(res.user.role, 'customer');
  t.equal(res.user.email_verified_at, null);
  t.match(res.user.created_at, ISO_RE);
  t.match(res.user.updated_at, ISO_RE);
  const created = Date.parse(res.user.created_at);
  t.ok(created >= before - 1 && created <= after + 1, 'created_at is the service clock at signup');

  t.strictSame(Object.keys(res.accountToken).sort(), ['secret', 'tokenId']);
  t.match(res.accountToken.tokenId, /^svca_[A-Za-z0-9_-]+$/);
  t.type(res.accountToken.secret, 'string');
  t.ok(res.accountToken.secret.length >= 32, 'secret has real entropy');
  t.not(res.accountToken.secret, res.accountToken.tokenId);

  const me = svc.client({ keyId: res.accountToken.tokenId, secret: res.accountToken.secret });
  t.strictSame(await me.v1.services.whoami(), {
    principal: 'account_token',
    userId: res.user.id,
    role: 'customer',
    organizations: [],
  });

  // The secret is what signs: the right token id with a wrong secret is refused.
  const forged = svc.client({ keyId: res.accountToken.tokenId, secret: res.accountToken.secret + 'x' });
  t.match(await errorOf(forged.v1.services.whoami()), { status: 401, code: 'unauthorized' });
});

t.test('signup with a taken email is 409, also when only the case differs', async (t) => {
  const local = `dup-${Date.now().toString(36)}`;
  const email = `${local}@example.test`;
  await svc.client().auth.signup({ email, password: 'first password 1' });

  const same = await errorOf(svc.client().auth.signup({ email, password: 'second password 2' }));
  t.match(same, { status: 409, code: 'conflict' });
  t.type(same.requestId, 'string');

  const upper = await errorOf(
    svc.client().auth.signup({ email: `${local.toUpperCase()}@EXAMPLE.TEST`, password: 'second password 2' }),
  );
  t.match(upper, { status: 409, code: 'conflict' });

  // The taken email still belongs to the first account: its password logs in, the rejected one does not.
  const login = await svc.client().auth.login({ email, password: 'first password 1' });
  t.equal(login.user.email, email);
  t.match(await errorOf(svc.client().auth.login({ email, password: 'second password 2' })), { status: 401 });
});

t.test('signup validates the password length and the email', async (t) => {
  const email = uniqueEmail('short');
  const short = await errorOf(svc.client().auth.signup({ email, password: '123456789' }));
  t.match(short, { status: 400, code: 'invalid_request' });
  t.ok(fields(short).includes('body.password'), `details name body.password (got ${JSON.stringify(short.details)})`);
  t.notOk(fields(short).includes('body.email'), 'the valid email is not blamed');

  // Nothing was created: the same email can sign up with a valid password (exactly 10 characters).
  const ok = await svc.client().auth.signup({ email, password: '1234567890' });
  t.equal(ok.user.email, email);

  for (const bad of ['not-an-email', 'no-at-sign.example.test', '@example.test', 'a b@example.test', '']) {
    const e = await errorOf(svc.client().auth.signup({ email: bad, password: 'a good long password' }));
    t.match(e, { status: 400, code: 'invalid_request' }, `email ${JSON.stringify(bad)} is refused`);
    t.ok(fields(e).includes('body.email'), `details name body.email for ${JSON.stringify(bad)}`);
  }

  const missing = await errorOf(svc.client().request('POST', '/auth/v1/signup', { email: uniqueEmail() }));
  t.match(missing, { status: 400, code: 'invalid_request' });
  t.ok(fields(missing).includes('body.password'), 'a missing password is named');
});

t.test('login issues a new token; both tokens work', async (t) => {
  const u = await svc.signup(uniqueEmail('login'), 'login password 123');
  const res = await svc.client().auth.login({ email: u.email, password: 'login password 123' });
  t.strictSame(Object.keys(res).sort(), ['accountToken', 'user']);
  t.equal(res.user.id, u.userId);
  t.equal(res.user.email, u.email);
  t.equal(res.user.role, 'customer');
  t.equal(res.user.email_verified_at, null);
  t.strictSame(Object.keys(res.user).sort(), ['created_at', 'email', 'email_verified_at', 'id', 'role', 'updated_at']);
  t.match(res.accountToken.tokenId, /^svca_/);
  t.not(res.accountToken.tokenId, u.tokenId, 'a different token than the signup one');
  t.not(res.accountToken.secret, u.secret);

  const second = svc.client({ keyId: res.accountToken.tokenId, secret: res.accountToken.secret });
  t.match(await second.v1.services.whoami(), { principal: 'account_token', userId: u.userId });
  t.match(await u.client.v1.services.whoami(), { principal: 'account_token', userId: u.userId });

  // Email lookup ignores case, as the uniqueness rule does.
  const upper = await svc.client().auth.login({ email: u.email.toUpperCase(), password: 'login password 123' });
  t.equal(upper.user.id, u.userId);
  t.not(upper.accountToken.tokenId, res.accountToken.tokenId);
});

t.test('login failures: wrong password and unknown email look the same', async (t) => {
  const u = await svc.signup(uniqueEmail('badlogin'), 'right password 123');
  const wrong = await errorOf(svc.client().auth.login({ email: u.email, password: 'wrong password 123' }));
  t.match(wrong, { status: 401, code: 'unauthorized' });
  const unknown = await errorOf(
    svc.client().auth.login({ email: uniqueEmail('nobody'), password: 'right password 123' }),
  );
  t.match(unknown, { status: 401, code: 'unauthorized' });
  t.equal(unknown.message, wrong.message, 'same message, so the answer does not tell whether the email exists');
  t.equal(unknown.details, wrong.details);
  t.ok(wrong.message.length > 0);
});

t.test('logout revokes the calling token only', async (t) => {
  const u = await svc.signup(uniqueEmail('logout'), 'logout password 1');
  const other = await svc.client().auth.login({ email: u.email, password: 'logout password 1' });
  const otherClient = svc.client({ keyId: other.accountToken.tokenId, secret: other.accountToken.secret });
  const stranger = await svc.signup();

  t.strictSame(await u.client.auth.logout(), { ok: true });
  t.match(await errorOf(u.client.v1.services.whoami()), { status: 401, code: 'unauthorized' });
  t.match(
    await errorOf(u.client.auth.logout()),
    { status: 401, code: 'unauthorized' },
    'a logged-out token cannot log out again',
  );

  t.match(
    await otherClient.v1.services.whoami(),
    { principal: 'account_token', userId: u.userId },
    "the user's other token still works",
  );
  t.match(
    await stranger.client.v1.services.whoami(),
    { principal: 'account_token', userId: stranger.userId },
    "another user's token still works",
  );

  // Logout needs an account token.
  t.match(await errorOf(svc.client().auth.logout()), { status: 401, code: 'unauthorized' }, 'unsigned');
  t.match(await errorOf(svc.admin().auth.logout()), { status: 401, code: 'unauthorized' }, 'platform key');
});

t.test('whoami', async (t) => {
  const u = await svc.signup();
  t.strictSame(await u.client.v1.services.whoami(), {
    principal: 'account_token',
    userId: u.userId,
    role: 'customer',
    organizations: [],
  });
  t.strictSame(await svc.admin().v1.services.whoami(), { principal: 'platform_admin' });
  t.match(await errorOf(svc.client().v1.services.whoami()), { status: 401, code: 'unauthorized' }, 'unsigned');
  t.match(
    await errorOf(svc.client({ adminKey: 'not-the-platform-key' }).v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'wrong platform key',
  );
});

t.test('GET /health answers unsigned', async (t) => {
  const res = await fetch(`${svc.url}/health`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type') ?? '', /application\/json/);
  const body = (await res.json()) as { ok: unknown; service: unknown; time: unknown };
  t.strictSame(Object.keys(body).sort(), ['ok', 'service', 'time']);
  t.equal(body.ok, true);
  t.type(body.service, 'string');
  t.ok((body.service as string).length > 0, 'service is named');
  t.type(body.time, 'string');
  t.match(body.time as string, ISO_RE);
  t.ok(Math.abs(Date.parse(body.time as string) - svc.clock.now()) < 60_000, 'time is the service clock');

  // The same through the SDK's unsigned client.
  const viaSdk = await svc.client().health();
  t.equal(viaSdk.ok, true);
  t.equal(viaSdk.service, body.service);
});
