// docs/api.md §4.10 account-token routes (/console/v1/account-tokens) and §5.3 (secret shown once).
import t from 'tap';
import type { Client } from '@svc-mail/sdk';
import { startTestService } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const tokenClient = (tokenId: string, secret: string): Client => svc.client({ keyId: tokenId, secret });

t.test('create returns the token once and it works', async (t) => {
  const u = await svc.signup();
  const before = svc.clock.now();
  const tok = await u.client.console.accountTokens.create({ label: 'deploy bot' });
  const after = svc.clock.now();

  t.strictSame(Object.keys(tok).sort(), ['createdAt', 'id', 'label', 'secret', 'tokenId', 'warning']);
  t.match(tok.id, UUID_RE);
  t.match(tok.tokenId, /^svca_[A-Za-z0-9_-]+$/);
  t.not(tok.tokenId, u.tokenId);
  t.type(tok.secret, 'string');
  t.ok(tok.secret.length >= 32, 'secret has real entropy');
  t.not(tok.secret, u.secret);
  t.equal(tok.label, 'deploy bot');
  t.match(tok.createdAt, ISO_RE);
  const created = Date.parse(tok.createdAt);
  t.ok(created >= before - 1 && created <= after + 1, 'createdAt is the service clock');
  t.type(tok.warning, 'string');
  t.ok(tok.warning.length > 0, 'carries a warning');

  const c = tokenClient(tok.tokenId, tok.secret);
  t.strictSame(await c.v1.services.whoami(), {
    principal: 'account_token',
    userId: u.userId,
    role: 'customer',
    organizations: [],
  });
  t.match(await u.client.v1.services.whoami(), { userId: u.userId }, 'the minting token keeps working');

  // A token can mint another.
  const child = await c.console.accountTokens.create();
  t.equal(child.label, null, 'no label is null');
  t.match(await tokenClient(child.tokenId, child.secret).v1.services.whoami(), { userId: u.userId });

  // The label is bounded.
  t.match(await errorOf(u.client.console.accountTokens.create({ label: 'x'.repeat(201) })), {
    status: 400,
    code: 'invalid_request',
  });
});

t.test('list shows own live tokens, never secrets, never other users', async (t) => {
  const a = await svc.signup();
  const b = await svc.signup();
  const a1 = await a.client.console.accountTokens.create({ label: 'a1' });
  const a2 = await a.client.console.accountTokens.create({ label: 'a2' });
  const b1 = await b.client.console.accountTokens.create({ label: 'b1' });

  const res = await a.client.console.accountTokens.list();
  t.strictSame(Object.keys(res), ['tokens']);
  const ids = res.tokens.map((x) => x.tokenId).sort();
  t.strictSame(ids, [a.tokenId, a1.tokenId, a2.tokenId].sort(), "exactly A's tokens");
  t.notOk(ids.includes(b.tokenId) || ids.includes(b1.tokenId), "none of B's");
  for (const row of res.tokens) {
    t.strictSame(Object.keys(row).sort(), ['createdAt', 'id', 'label', 'tokenId'], `fields of ${row.tokenId}`);
    t.notOk('secret' in row, 'no secret');
    t.match(row.id, UUID_RE);
    t.match(row.createdAt, ISO_RE);
  }
  const raw = JSON.stringify(res);
  for (const s of [a.secret, a1.secret, a2.secret]) t.notOk(raw.includes(s), 'no secret value anywhere in the list');
  const byToken = new Map(res.tokens.map((x) => [x.tokenId, x]));
  t.equal(byToken.get(a1.tokenId)?.label, 'a1');
  t.equal(byToken.get(a1.tokenId)?.id, a1.id);
  t.equal(byToken.get(a2.tokenId)?.label, 'a2');
  t.equal(byToken.get(a2.tokenId)?.createdAt, a2.createdAt);

  const bIds = (await b.client.console.accountTokens.list()).tokens.map((x) => x.tokenId).sort();
  t.strictSame(bIds, [b.tokenId, b1.tokenId].sort(), "B sees exactly B's");

  // A revoked token leaves the list.
  await a.client.console.accountTokens.delete({ id: a2.tokenId });
  const after = (await a.client.console.accountTokens.list()).tokens.map((x) => x.tokenId).sort();
  t.strictSame(after, [a.tokenId, a1.tokenId].sort());
});

t.test('delete by tokenId and by id revokes', async (t) => {
  const u = await svc.signup();
  const byTokenId = await u.client.console.accountTokens.create({ label: 'by tokenId' });
  const byId = await u.client.console.accountTokens.create({ label: 'by id' });
  const c1 = tokenClient(byTokenId.tokenId, byTokenId.secret);
  const c2 = tokenClient(byId.tokenId, byId.secret);
  t.match(await c1.v1.services.whoami(), { userId: u.userId });
  t.match(await c2.v1.services.whoami(), { userId: u.userId });

  t.strictSame(await u.client.console.accountTokens.delete({ id: byTokenId.tokenId }), { ok: true });
  t.match(await errorOf(c1.v1.services.whoami()), { status: 401, code: 'unauthorized' }, 'revoked by tokenId');
  t.match(await c2.v1.services.whoami(), { userId: u.userId }, 'only the named token');

  t.strictSame(await u.client.console.accountTokens.delete({ id: byId.id }), { ok: true });
  t.match(await errorOf(c2.v1.services.whoami()), { status: 401, code: 'unauthorized' }, 'revoked by id');
  t.match(await u.client.v1.services.whoami(), { userId: u.userId }, 'the caller keeps working');

  t.match(
    await errorOf(u.client.console.accountTokens.delete({ id: byId.id })),
    { status: 404, code: 'not_found' },
    'a revoked token is gone',
  );
  t.match(await errorOf(u.client.console.accountTokens.delete({ id: byTokenId.tokenId })), {
    status: 404,
    code: 'not_found',
  });
  t.match(await errorOf(u.client.console.accountTokens.delete({ id: 'svca_doesnotexist' })), {
    status: 404,
    code: 'not_found',
  });
  t.match(await errorOf(u.client.console.accountTokens.delete({ id: '00000000-0000-0000-0000-000000000000' })), {
    status: 404,
    code: 'not_found',
  });

  // A token may revoke itself.
  const self = await u.client.console.accountTokens.create();
  const selfClient = tokenClient(self.tokenId, self.secret);
  t.strictSame(await selfClient.console.accountTokens.delete({ id: self.tokenId }), { ok: true });
  t.match(await errorOf(selfClient.v1.services.whoami()), { status: 401 });
});

t.test("deleting another user's token is 404 and leaves it working", async (t) => {
  const a = await svc.signup();
  const b = await svc.signup();
  const bTok = await b.client.console.accountTokens.create({ label: 'b' });
  const bClient = tokenClient(bTok.tokenId, bTok.secret);

  t.match(
    await errorOf(a.client.console.accountTokens.delete({ id: bTok.tokenId })),
    { status: 404, code: 'not_found' },
    'by tokenId',
  );
  t.match(
    await errorOf(a.client.console.accountTokens.delete({ id: bTok.id })),
    { status: 404, code: 'not_found' },
    'by id',
  );
  t.match(
    await errorOf(a.client.console.accountTokens.delete({ id: b.tokenId })),
    { status: 404, code: 'not_found' },
    "B's signup token",
  );

  t.match(await bClient.v1.services.whoami(), { userId: b.userId }, "B's minted token still works");
  t.match(await b.client.v1.services.whoami(), { userId: b.userId }, "B's signup token still works");
  const bList = (await b.client.console.accountTokens.list()).tokens.map((x) => x.tokenId).sort();
  t.strictSame(bList, [b.tokenId, bTok.tokenId].sort(), "B's list is unchanged");
});

t.test('the account-token routes take only an account token', async (t) => {
  const u = await svc.signup();
  const tok = await u.client.console.accountTokens.create({ label: 'target' });
  const admin = svc.admin();
  const unsigned = svc.client();
  for (const [name, c] of [
    ['platform key', admin],
    ['unsigned', unsigned],
  ] as const) {
    t.match(
      await errorOf(c.console.accountTokens.create({ label: 'x' })),
      { status: 401, code: 'unauthorized' },
      `${name}: create`,
    );
    t.match(await errorOf(c.console.accountTokens.list()), { status: 401, code: 'unauthorized' }, `${name}: list`);
    t.match(
      await errorOf(c.console.accountTokens.delete({ id: tok.tokenId })),
      { status: 401, code: 'unauthorized' },
      `${name}: delete`,
    );
  }
  t.match(
    await tokenClient(tok.tokenId, tok.secret).v1.services.whoami(),
    { userId: u.userId },
    'the target token survived',
  );
  const ids = (await u.client.console.accountTokens.list()).tokens.map((x) => x.tokenId).sort();
  t.strictSame(ids, [u.tokenId, tok.tokenId].sort(), 'no token was minted by the refused creates');
});
