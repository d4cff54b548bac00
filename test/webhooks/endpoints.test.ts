// docs/api.md §4.8 webhook endpoints through the SDK against the live service: register (the whsec_ secret
// once, sealed at rest), list, delete, the events list, the URL rules (private targets refused unless
// SVC_ALLOW_PRIVATE_WEBHOOKS=1), the per-project limit, and the same through the data layer
// (webhook_endpoints; webhook_deliveries read-only).
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';
import { webhookSecretAad } from '../../storage/pg/webhooks.js';
import { MAX_WEBHOOKS_PER_PROJECT } from '@svc-mail/sdk';

const svc = await startTestService(t);
const db = svc.running.storage.db;

async function tenant() {
  svc.clock.advance(10_000);
  const owner = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Hooks Org' });
  const { project, apiKey } = await owner.client.console.projects.create({
    name: 'hooks',
    organizationId: organization.id,
  });
  return { owner, org: organization, project, admin: svc.client({ keyId: apiKey.keyId, secret: apiKey.secret }) };
}

t.test('register, list, delete; the secret is returned once and sealed at rest', async (t) => {
  const a = await tenant();
  const c = a.owner.client.console.projects.webhooks;
  const created = await c.create({
    id: a.project.id,
    url: 'https://Hooks.Example.com/svc?x=1',
    events: ['delivered', 'bounced'],
  });
  t.match(created, { url: 'https://hooks.example.com/svc?x=1', events: ['delivered', 'bounced'], warning: /once/ });
  t.match(created.secret, /^whsec_[A-Za-z0-9+/]{43}=$/, 'whsec_ and base64 of 32 bytes');
  t.match(created.createdAt, /^\d{4}-\d\d-\d\dT/);
  const all = await c.create({ id: a.project.id, url: 'https://hooks.example.com/all' });
  t.same(all.events, [], 'no events: every kind (docs/decisions.md #5)');
  t.same((await c.create({ id: a.project.id, url: 'https://hooks.example.com/empty', events: [] })).events, []);

  const listed = await c.list({ id: a.project.id });
  t.same(
    listed.webhooks.map((w) => w.url),
    ['https://hooks.example.com/svc?x=1', 'https://hooks.example.com/all', 'https://hooks.example.com/empty'],
  );
  t.strictSame(
    listed.webhooks[0],
    { id: created.id, url: created.url, events: created.events, createdAt: created.createdAt },
    'no secret in the list',
  );
  const detail = await a.owner.client.console.projects.get({ id: a.project.id });
  t.same(
    detail.webhooks.map((w) => w.id),
    listed.webhooks.map((w) => w.id),
    'the project detail lists them',
  );
  t.notOk(JSON.stringify(detail).includes(created.secret), 'and never the secret');
  // A project key with project:admin manages them too (docs/api.md §5.3).
  t.same((await a.admin.console.projects.webhooks.list({ id: a.project.id })).webhooks.length, 3);

  // At rest: sealed with the master key, bound to its row.
  const [row] = await db.query<{ secret_sealed: string }>('SELECT secret_sealed FROM webhook_endpoints WHERE id = $1', [
    created.id,
  ]);
  t.notOk(row!.secret_sealed.includes(created.secret.slice(6)), 'not stored in clear');
  t.equal(
    svc.running.storage.sealer.open(row!.secret_sealed, webhookSecretAad(created.id)),
    created.secret,
    'opens for its own row',
  );
  t.throws(() => svc.running.storage.sealer.open(row!.secret_sealed, webhookSecretAad(all.id)), 'and no other');
  const audit = await db.query<{ target_id: string }>(
    `SELECT target_id FROM audit_log WHERE action = 'console.projects.webhooks.create'`,
  );
  t.ok(
    audit.some((r) => r.target_id === created.id),
    'registering is audited',
  );

  t.strictSame(await c.delete({ id: a.project.id, webhookId: created.id }), { ok: true });
  t.same(
    (await c.list({ id: a.project.id })).webhooks.map((w) => w.id),
    [all.id, listed.webhooks[2]!.id],
  );
  t.match(
    await errorOf(c.delete({ id: a.project.id, webhookId: created.id })),
    { status: 404, code: 'not_found' },
    'deleting twice: 404',
  );
  t.match(await errorOf(c.delete({ id: a.project.id, webhookId: 'not-a-uuid' })), { status: 404 });

  // Another project's webhook is not found through this one.
  const b = await tenant();
  const theirs = await b.owner.client.console.projects.webhooks.create({
    id: b.project.id,
    url: 'https://b.example.com/h',
  });
  t.match(await errorOf(a.owner.client.console.projects.webhooks.delete({ id: a.project.id, webhookId: theirs.id })), {
    status: 404,
  });
  t.match(
    await errorOf(a.owner.client.console.projects.webhooks.list({ id: b.project.id })),
    { status: 404 },
    'nor listed by a non-member',
  );
  t.equal((await b.owner.client.console.projects.webhooks.list({ id: b.project.id })).webhooks.length, 1, 'untouched');
});

t.test('events: only the webhook kinds, each once', async (t) => {
  const a = await tenant();
  const c = a.owner.client;
  t.same(
    (
      await c.console.projects.webhooks.create({
        id: a.project.id,
        url: 'https://e.example.com/',
        events: ['delivered', 'deferred', 'bounced', 'failed', 'suppressed', 'complained'],
      })
    ).events.length,
    6,
  );
  for (const events of [['queued'], ['sending'], ['opened'], ['delivered', 'delivered']]) {
    t.match(
      await errorOf(
        c.request('POST', `/console/v1/projects/${a.project.id}/webhooks`, { url: 'https://e.example.com/', events }),
      ),
      { status: 400, code: 'invalid_request' },
      `${JSON.stringify(events)}: 400`,
    );
  }
});

t.test('URLs: http(s) only, public targets only unless SVC_ALLOW_PRIVATE_WEBHOOKS=1', async (t) => {
  const a = await tenant();
  const create = (url: string) => a.owner.client.console.projects.webhooks.create({ id: a.project.id, url });
  for (const [url, message] of [
    ['http://127.0.0.1:9000/hook', /127\.0\.0\.1 \(loopback\); webhooks go to public internet addresses only/],
    ['http://localhost/hook', /localhost \(loopback\)/],
    ['http://[::1]:8080/', /::1 \(loopback\)/],
    ['http://10.0.0.7/', /10\.0\.0\.7 \(private\)/],
    ['http://192.168.1.20/', /private/],
    ['http://169.254.169.254/latest/meta-data/', /link-local/],
    ['http://100.64.1.1/', /CGNAT/],
    ['http://[fd00::1]/', /unique local/],
    ['http://[::ffff:127.0.0.1]/', /loopback/],
    ['http://0.0.0.0:80/', /unspecified/],
    ['ftp://example.com/hook', /http or https/],
    ['not a url', /absolute URL/],
    ['https://user:secret@example.com/hook', /user name or password/],
  ] as const) {
    const err = await errorOf(create(url));
    t.match(
      { status: err.status, code: err.code, message: err.message },
      { status: 400, code: 'invalid_request', message },
      `${url}: 400 ${err.message}`,
    );
    t.match(err.details, [{ field: 'body.url' }]);
  }
  t.same(
    (await a.owner.client.console.projects.webhooks.list({ id: a.project.id })).webhooks,
    [],
    'nothing registered',
  );
  // The data layer applies the same rule.
  t.match(
    await errorOf(a.owner.client.v1.webhook_endpoints.create({ project_id: a.project.id, url: 'http://127.0.0.1/' })),
    { status: 400, code: 'invalid_request' },
  );

  const open = await startTestService(t, { env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' } });
  const owner = await open.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Closed network' });
  const { project } = await owner.client.console.projects.create({ name: 'p', organizationId: organization.id });
  for (const url of ['http://127.0.0.1:9000/hook', 'http://10.0.0.7/', 'http://[::1]:8080/']) {
    t.match(
      await owner.client.console.projects.webhooks.create({ id: project.id, url }),
      { url },
      `${url} allowed with SVC_ALLOW_PRIVATE_WEBHOOKS=1`,
    );
  }
  t.match(
    await errorOf(owner.client.console.projects.webhooks.create({ id: project.id, url: 'ftp://127.0.0.1/' })),
    { status: 400 },
    'the scheme rule stays',
  );
});

t.test(`at most ${MAX_WEBHOOKS_PER_PROJECT} endpoints per project`, async (t) => {
  const a = await tenant();
  for (let i = 0; i < MAX_WEBHOOKS_PER_PROJECT; i++)
    await a.owner.client.console.projects.webhooks.create({ id: a.project.id, url: `https://h${i}.example.com/` });
  t.match(
    await errorOf(
      a.owner.client.console.projects.webhooks.create({ id: a.project.id, url: 'https://one-more.example.com/' }),
    ),
    { status: 409, code: 'conflict' },
  );
});

t.test('roles and scopes: projects:manage to write, membership to read; project:admin for keys', async (t) => {
  const a = await tenant();
  const { code } = await a.owner.client.console.organizations.joinCodes.create({ id: a.org.id, role: 'auditor' });
  const auditor = await svc.signup();
  await auditor.client.console.organizations.join({ code });
  const hook = await a.owner.client.console.projects.webhooks.create({
    id: a.project.id,
    url: 'https://r.example.com/',
  });
  t.same(
    (await auditor.client.console.projects.webhooks.list({ id: a.project.id })).webhooks.map((w) => w.id),
    [hook.id],
    'an auditor reads',
  );
  t.match(
    await errorOf(auditor.client.console.projects.webhooks.create({ id: a.project.id, url: 'https://x.example.com/' })),
    { status: 403, code: 'forbidden' },
  );
  t.match(await errorOf(auditor.client.console.projects.webhooks.delete({ id: a.project.id, webhookId: hook.id })), {
    status: 403,
    code: 'forbidden',
  });
  t.match(await errorOf(auditor.client.v1.webhook_endpoints.delete({ id: hook.id })), {
    status: 403,
    code: 'forbidden',
  });

  const sendKey = await a.owner.client.console.projects.apiKeys.create({
    id: a.project.id,
    scopes: ['messages:send', 'messages:read'],
  });
  const k = svc.client({ keyId: sendKey.keyId, secret: sendKey.secret });
  t.match(
    await errorOf(k.console.projects.webhooks.list({ id: a.project.id })),
    { status: 403, code: 'forbidden' },
    'a key without project:admin',
  );
  t.match(await errorOf(k.console.projects.webhooks.create({ id: a.project.id, url: 'https://x.example.com/' })), {
    status: 403,
  });
  t.match(await errorOf(k.v1.webhook_endpoints.list()), { status: 403 });
  t.match(await errorOf(k.v1.webhook_deliveries.list()), { status: 403 });
});

t.test(
  'the data layer: webhook_endpoints list, get, create (201, secret once), delete; webhook_deliveries read-only',
  async (t) => {
    const a = await tenant();
    const dl = a.owner.client.v1;
    const { row } = await dl.webhook_endpoints.create({
      project_id: a.project.id,
      url: 'https://dl.example.com/h',
      events: ['suppressed'],
    });
    t.match(row, {
      project_id: a.project.id,
      url: 'https://dl.example.com/h',
      events: ['suppressed'],
      secret: /^whsec_/,
    });
    const [audit] = await db.query<{ project_id: string }>(
      `SELECT project_id FROM audit_log WHERE action = 'v1.webhook_endpoints.create' AND target_id = $1`,
      [row.id],
    );
    t.equal(audit?.project_id, a.project.id, 'audited with its project');
    const { secret, ...plain } = row;
    t.ok(secret);
    t.strictSame((await dl.webhook_endpoints.get({ id: row.id })).row, plain, 'get: the row without its secret');
    t.strictSame((await dl.webhook_endpoints.list({ project_id: a.project.id })).rows, [plain]);
    t.strictSame((await a.admin.v1.webhook_endpoints.list()).rows, [plain], "a project:admin key lists its project's");
    t.same(
      (await a.owner.client.console.projects.webhooks.list({ id: a.project.id })).webhooks.map((w) => w.id),
      [row.id],
      'the console sees it',
    );

    const b = await tenant();
    t.same((await b.owner.client.v1.webhook_endpoints.list()).rows, [], 'another tenant sees none');
    t.match(await errorOf(b.owner.client.v1.webhook_endpoints.get({ id: row.id })), { status: 404 });
    t.match(await errorOf(b.owner.client.v1.webhook_endpoints.delete({ id: row.id })), { status: 404 });
    t.match(
      await errorOf(
        b.owner.client.v1.webhook_endpoints.create({ project_id: a.project.id, url: 'https://x.example.com/' }),
      ),
      { status: 404 },
    );

    for (const target of [
      '/v1/webhook_deliveries/create',
      '/v1/webhook_deliveries/update',
      '/v1/webhook_deliveries/delete',
    ]) {
      t.match(
        await errorOf(a.owner.client.request('POST', target, { id: row.id })),
        { status: 404, code: 'not_found' },
        `${target}: not enabled`,
      );
    }
    t.same((await dl.webhook_deliveries.list()).rows, [], 'no attempts yet');
    t.strictSame(await dl.webhook_endpoints.delete({ id: row.id }), { ok: true });
    t.match(await errorOf(dl.webhook_endpoints.get({ id: row.id })), { status: 404 });
  },
);
