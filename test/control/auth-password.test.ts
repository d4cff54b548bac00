// docs/api.md §4.2 password change, forgot and reset; §8 (reset link valid 1 h, single use);
// docs/decisions.md #12 (at least 10 characters) and #14 (a reset revokes all the user's account tokens).
import t from 'tap';
import { SvcError, type Client } from '@svc-mail/sdk';
import { listNotifications, type OutboxRow } from '../../storage/pg/notification-outbox.js';
import { startTestService, uniqueEmail } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);
const HOUR = 60 * 60 * 1000;

const fields = (e: SvcError) => ((e.details ?? []) as { field?: string }[]).map((d) => d.field);
const outbox = (recipient: string) => listNotifications(svc.running.storage.db, { recipient });
const openBody = (row: OutboxRow) => svc.running.storage.sealer.open(row.bodySealed, `notification_outbox:${row.id}`);
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** Asks for a reset of `email` and returns the token of the one new mail it queued. */
async function requestReset(email: string): Promise<string> {
  const before = new Set((await outbox(email)).map((r) => r.id));
  await svc.client().auth.password.forgot({ email });
  // The row that was not there before (two requests in one millisecond share created_at).
  const added = (await outbox(email)).filter((r) => !before.has(r.id));
  if (added.length !== 1) throw new Error(`expected one new outbox row for ${email}, got ${added.length}`);
  const text = openBody(added[0]!);
  const m = new RegExp(`${escapeRe(svc.running.publicUrl)}/reset-password\\?token=([A-Za-z0-9_\\-.~%]+)`).exec(text);
  if (!m) throw new Error(`no reset link in the mail: ${text}`);
  return decodeURIComponent(m[1]!);
}

const tokenClient = (tokenId: string, secret: string): Client => svc.client({ keyId: tokenId, secret });

async function loginClient(email: string, password: string): Promise<Client> {
  const r = await svc.client().auth.login({ email, password });
  return tokenClient(r.accountToken.tokenId, r.accountToken.secret);
}

t.test('password change', async (t) => {
  const u = await svc.signup(uniqueEmail('change'), 'old password 123');

  const wrong = await errorOf(
    u.client.auth.password.change({ currentPassword: 'not my password', newPassword: 'new password 456' }),
  );
  t.match(wrong, { status: 401, code: 'unauthorized' });
  await loginClient(u.email, 'old password 123').then(
    () => t.pass('a refused change leaves the old password in place'),
    (e) => t.fail(`old password no longer logs in after a refused change: ${e}`),
  );

  const short = await errorOf(
    u.client.auth.password.change({ currentPassword: 'old password 123', newPassword: '123456789' }),
  );
  t.match(short, { status: 400, code: 'invalid_request' });
  t.ok(
    fields(short).includes('body.newPassword'),
    `details name body.newPassword (got ${JSON.stringify(short.details)})`,
  );
  t.match(
    await errorOf(svc.client().auth.login({ email: u.email, password: '123456789' })),
    { status: 401 },
    'the short password was not set',
  );

  t.strictSame(
    await u.client.auth.password.change({ currentPassword: 'old password 123', newPassword: 'new password 456' }),
    { ok: true },
  );
  const after = await loginClient(u.email, 'new password 456');
  t.match(
    await after.v1.services.whoami(),
    { principal: 'account_token', userId: u.userId },
    'the new password logs in',
  );
  t.match(
    await errorOf(svc.client().auth.login({ email: u.email, password: 'old password 123' })),
    { status: 401, code: 'unauthorized' },
    'the old one no longer does',
  );

  // The current password is now the new one.
  t.match(
    await errorOf(
      u.client.auth.password.change({ currentPassword: 'old password 123', newPassword: 'third password 789' }),
    ),
    { status: 401 },
  );

  // Spec: "no email".
  t.equal((await outbox(u.email)).length, 0, 'a password change mails nothing');

  // Needs an account token.
  t.match(
    await errorOf(
      svc.client().auth.password.change({ currentPassword: 'new password 456', newPassword: 'third password 789' }),
    ),
    { status: 401 },
  );
  t.match(
    await errorOf(
      svc.admin().auth.password.change({ currentPassword: 'new password 456', newPassword: 'third password 789' }),
    ),
    { status: 401 },
  );
});

t.test('password forgot: always ok; one sealed mail with a reset link for an existing account', async (t) => {
  const u = await svc.signup(uniqueEmail('forgot'), 'forgot password 1');
  const nobody = uniqueEmail('nobody');
  const allBefore = (await listNotifications(svc.running.storage.db)).length;

  t.strictSame(await svc.client().auth.password.forgot({ email: u.email }), { ok: true });
  t.strictSame(
    await svc.client().auth.password.forgot({ email: nobody }),
    { ok: true },
    'same answer for an unknown email',
  );

  t.equal((await outbox(nobody)).length, 0, 'no mail for an unknown email');
  t.equal((await listNotifications(svc.running.storage.db)).length, allBefore + 1, 'exactly one mail queued in all');

  const rows = await outbox(u.email);
  t.equal(rows.length, 1, 'exactly one mail for the account');
  const row = rows[0]!;
  t.equal(row.kind, 'password_reset');
  t.equal(row.recipient, u.email);
  t.equal(row.sender, 'no-reply@mta.test', 'sent from the platform notification address');
  t.equal(row.sender, svc.running.ctx.config.notifyFrom);
  t.type(row.subject, 'string');
  t.ok(row.subject.length > 0, 'has a subject');

  const text = openBody(row);
  const publicUrl = svc.running.publicUrl;
  t.match(publicUrl, /^http:\/\/127\.0\.0\.1:\d+$/);
  const m = new RegExp(`${escapeRe(publicUrl)}/reset-password\\?token=([A-Za-z0-9_-]+)`).exec(text);
  t.ok(m, `the body links to ${publicUrl}/reset-password?token=... (body: ${text})`);
  const token = m?.[1] ?? '';
  t.ok(token.length >= 32, 'the token has real entropy');

  // Sealed at rest: the stored column holds neither the token nor the link, and is bound to its row.
  const stored = await svc.running.storage.db.query<{ body_sealed: string }>(
    'SELECT body_sealed FROM notification_outbox WHERE id = $1',
    [row.id],
  );
  t.equal(stored.length, 1);
  const sealed = stored[0]!.body_sealed;
  t.equal(sealed, row.bodySealed);
  t.notOk(sealed.includes(token), 'body_sealed does not contain the token in clear');
  t.notOk(sealed.includes('reset-password'), 'body_sealed does not contain the link in clear');
  t.notOk(sealed.includes(Buffer.from(token).toString('base64').slice(0, 24)), 'nor the token merely base64-encoded');
  t.throws(
    () => svc.running.storage.sealer.open(sealed, 'notification_outbox:00000000-0000-0000-0000-000000000000'),
    'does not open under another row',
  );

  // The token works.
  t.strictSame(await svc.client().auth.password.reset({ token, password: 'reset password 99' }), { ok: true });
  await loginClient(u.email, 'reset password 99');
  t.pass('the reset link from the mail sets the password');

  // The email is looked up ignoring case; the mail goes to the stored address.
  const v = await svc.signup(uniqueEmail('forgotcase'), 'forgot password 2');
  t.strictSame(await svc.client().auth.password.forgot({ email: v.email.toUpperCase() }), { ok: true });
  const vRows = await outbox(v.email);
  t.equal(vRows.length, 1, 'a different-case email still finds the account');
  t.equal(vRows[0]?.recipient, v.email);
});

t.test('password reset sets the password and revokes every account token of the user', async (t) => {
  const u = await svc.signup(uniqueEmail('reset'), 'before reset 123');
  const login = await loginClient(u.email, 'before reset 123');
  const minted = await u.client.console.accountTokens.create({ label: 'ci' });
  const mintedClient = tokenClient(minted.tokenId, minted.secret);
  const bystander = await svc.signup();
  for (const c of [u.client, login, mintedClient])
    t.match(await c.v1.services.whoami(), { userId: u.userId }, 'works before the reset');

  const token = await requestReset(u.email);
  // A session opened after the link was mailed is an existing session at reset time too.
  const between = await loginClient(u.email, 'before reset 123');
  t.strictSame(await svc.client().auth.password.reset({ token, password: 'after reset 456' }), { ok: true });

  t.match(await errorOf(u.client.v1.services.whoami()), { status: 401, code: 'unauthorized' }, 'signup token revoked');
  t.match(await errorOf(login.v1.services.whoami()), { status: 401, code: 'unauthorized' }, 'login token revoked');
  t.match(
    await errorOf(mintedClient.v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'minted token revoked',
  );
  t.match(
    await errorOf(between.v1.services.whoami()),
    { status: 401, code: 'unauthorized' },
    'token from a login after the forgot revoked',
  );
  t.match(
    await bystander.client.v1.services.whoami(),
    { userId: bystander.userId },
    "another user's token is untouched",
  );

  const fresh = await loginClient(u.email, 'after reset 456');
  t.match(
    await fresh.v1.services.whoami(),
    { principal: 'account_token', userId: u.userId },
    'the new password logs in',
  );
  t.match(
    await errorOf(svc.client().auth.login({ email: u.email, password: 'before reset 123' })),
    { status: 401 },
    'the old one does not',
  );
  const list = await fresh.console.accountTokens.list();
  t.equal(list.tokens.length, 1, 'only the token minted after the reset is live');

  // Single use.
  const again = await errorOf(svc.client().auth.password.reset({ token, password: 'third password 789' }));
  t.match(again, { status: 401, code: 'unauthorized' });
  t.match(
    await errorOf(svc.client().auth.login({ email: u.email, password: 'third password 789' })),
    { status: 401 },
    'the reused token set nothing',
  );
  t.match(await fresh.v1.services.whoami(), { userId: u.userId }, 'a refused reuse revokes nothing');
});

t.test('password reset: garbage tokens are 401', async (t) => {
  for (const token of ['garbage', 'A'.repeat(43), "' OR 1=1 --"]) {
    const e = await errorOf(svc.client().auth.password.reset({ token, password: 'whatever password 1' }));
    t.match(e, { status: 401, code: 'unauthorized' }, `token ${JSON.stringify(token)}`);
  }
  t.match(
    await errorOf(svc.client().auth.password.reset({ token: '', password: 'whatever password 1' })),
    { status: 400, code: 'invalid_request' },
    'an empty token is malformed',
  );
});

t.test('password reset: a too-short password is 400 and does not consume the token', async (t) => {
  const u = await svc.signup(uniqueEmail('resetshort'), 'before reset 123');
  const token = await requestReset(u.email);

  const short = await errorOf(svc.client().auth.password.reset({ token, password: '123456789' }));
  t.match(short, { status: 400, code: 'invalid_request' });
  t.ok(fields(short).includes('body.password'), `details name body.password (got ${JSON.stringify(short.details)})`);
  t.match(await u.client.v1.services.whoami(), { userId: u.userId }, 'a refused reset revokes nothing');

  t.strictSame(
    await svc.client().auth.password.reset({ token, password: '1234567890' }),
    { ok: true },
    'the token still works',
  );
  await loginClient(u.email, '1234567890');
  t.pass('the password is the one of the second attempt');
});

// These move the service clock forward for good; they come last in this file.
t.test('password reset: the link is valid for one hour', async (t) => {
  const early = await svc.signup(uniqueEmail('reset59'), 'before reset 123');
  const late = await svc.signup(uniqueEmail('reset61'), 'before reset 123');
  const earlyToken = await requestReset(early.email);
  const lateToken = await requestReset(late.email);

  svc.clock.advance(59 * 60 * 1000);
  t.strictSame(
    await svc.client().auth.password.reset({ token: earlyToken, password: 'after 59 minutes' }),
    { ok: true },
    'works at 59 minutes',
  );
  await loginClient(early.email, 'after 59 minutes');
  t.pass('the 59-minute reset took effect');

  svc.clock.advance(HOUR + 1 - 59 * 60 * 1000);
  const expired = await errorOf(svc.client().auth.password.reset({ token: lateToken, password: 'after an hour 1' }));
  t.match(expired, { status: 401, code: 'unauthorized' }, 'refused past one hour');
  await loginClient(late.email, 'before reset 123');
  t.pass('the expired token changed nothing: the old password still logs in');
  t.match(await late.client.v1.services.whoami(), { userId: late.userId }, 'and revoked nothing');

  // A link asked for now is valid again for an hour from now.
  const renewed = await requestReset(late.email);
  t.strictSame(await svc.client().auth.password.reset({ token: renewed, password: 'after an hour 2' }), { ok: true });
});

t.test('password reset retires the other outstanding links of the user', async (t) => {
  const me = await svc.signup();
  const older = await requestReset(me.email);
  const newer = await requestReset(me.email);
  t.not(older, newer, 'two distinct links');
  t.same(await svc.client().auth.password.reset({ token: newer, password: 'the newest password' }), { ok: true });
  const e = await errorOf(svc.client().auth.password.reset({ token: older, password: 'an older link password' }));
  t.equal(e.status, 401, 'the older link no longer works');
  await loginClient(me.email, 'the newest password');
  t.pass('the password set with the newer link stands');
});
