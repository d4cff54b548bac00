// docs/api.md §4.1 rule 3: webhook_endpoints is writable without restriction, so update and upsert work
// on it as create and delete do. Upsert's natural key is (project_id, url). The secret leaves the server
// once, in the answer to the write that created the row; unknown fields are refused (docs/decisions.md #23).
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const svc = await startTestService(t);
const db = svc.running.storage.db;

async function tenant() {
  svc.clock.advance(10_000);
  const owner = await svc.signup();
  const { organization } = await owner.client.console.organizations.create({ name: 'Rows Org' });
  const { project } = await owner.client.console.projects.create({ name: 'rows', organizationId: organization.id });
  return { owner, project, dl: owner.client.v1 };
}

const sealedOf = async (id: string) =>
  (await db.query<{ secret_sealed: string }>('SELECT secret_sealed FROM webhook_endpoints WHERE id = $1', [id]))[0]
    ?.secret_sealed;

t.test('update changes url and events of an owned endpoint; the secret stays and is not returned', async (t) => {
  const a = await tenant();
  const { row } = await a.dl.webhook_endpoints.create({ project_id: a.project.id, url: 'https://one.example.com/h' });
  const sealed = await sealedOf(row.id);

  const { row: changed } = await a.dl.webhook_endpoints.update({
    id: row.id,
    url: 'https://Two.Example.com/h2',
    events: ['bounced', 'complained'],
  });
  t.strictSame(changed, {
    id: row.id,
    project_id: a.project.id,
    url: 'https://two.example.com/h2',
    events: ['bounced', 'complained'],
    created_at: row.created_at,
  });
  t.notOk('secret' in changed, 'no secret in the answer');
  t.equal(await sealedOf(row.id), sealed, 'the secret at rest is unchanged');

  const { row: eventsOnly } = await a.dl.webhook_endpoints.update({ id: row.id, events: [] });
  t.equal(eventsOnly.url, 'https://two.example.com/h2', 'an absent url is kept');
  t.same(eventsOnly.events, [], 'events [] subscribes to every kind');
  t.strictSame((await a.dl.webhook_endpoints.get({ id: row.id })).row, eventsOnly, 'get reads the change');

  const [audit] = await db.query<{ project_id: string }>(
    `SELECT project_id FROM audit_log WHERE action = 'v1.webhook_endpoints.update' AND target_id = $1`,
    [row.id],
  );
  t.equal(audit?.project_id, a.project.id, 'audited with its project');

  t.match(
    await errorOf(a.dl.webhook_endpoints.update({ id: row.id, url: 'http://127.0.0.1/' })),
    { status: 400, code: 'invalid_request' },
    'the URL rules of create apply',
  );
  t.match(await errorOf(a.dl.webhook_endpoints.update({ id: '00000000-0000-4000-8000-000000000000' })), {
    status: 404,
  });
});

t.test("update of another tenant's endpoint is 404 and changes nothing", async (t) => {
  const a = await tenant();
  const b = await tenant();
  const { row } = await a.dl.webhook_endpoints.create({ project_id: a.project.id, url: 'https://mine.example.com/' });
  t.match(await errorOf(b.dl.webhook_endpoints.update({ id: row.id, url: 'https://theirs.example.com/' })), {
    status: 404,
    code: 'not_found',
  });
  t.equal((await a.dl.webhook_endpoints.get({ id: row.id })).row.url, 'https://mine.example.com/');
});

t.test('upsert inserts (secret once), then updates the events of the endpoint at the same url', async (t) => {
  const a = await tenant();
  const first = await a.dl.webhook_endpoints.upsert({
    project_id: a.project.id,
    url: 'https://Up.Example.com/h',
    events: ['delivered'],
  });
  t.match(first.row, { project_id: a.project.id, url: 'https://up.example.com/h', events: ['delivered'] });
  t.match(first.row.secret, /^whsec_/, 'inserted: the secret, this once');
  const sealed = await sealedOf(first.row.id);

  // The same url as stored (the host's case does not make another endpoint).
  const again = await a.dl.webhook_endpoints.upsert({
    project_id: a.project.id,
    url: 'https://up.example.com/h',
    events: ['bounced', 'failed'],
  });
  const { secret: _, ...plain } = first.row;
  t.strictSame(again.row, { ...plain, events: ['bounced', 'failed'] }, 'updated on (project_id, url), no secret');
  t.equal(await sealedOf(first.row.id), sealed, 'the secret at rest is unchanged');
  t.equal((await a.dl.webhook_endpoints.list({ project_id: a.project.id })).rows.length, 1, 'one endpoint');

  const other = await a.dl.webhook_endpoints.upsert({ project_id: a.project.id, url: 'https://up.example.com/other' });
  t.not(other.row.id, first.row.id, 'another url is another endpoint');
  t.same(other.row.events, []);
  t.match(other.row.secret, /^whsec_/);

  const b = await tenant();
  t.match(
    await errorOf(b.dl.webhook_endpoints.upsert({ project_id: a.project.id, url: 'https://up.example.com/h' })),
    { status: 404 },
    "another tenant's project",
  );
  const theirs = await b.dl.webhook_endpoints.upsert({ project_id: b.project.id, url: 'https://up.example.com/h' });
  t.not(theirs.row.id, first.row.id, 'the natural key includes the project');
  t.match(theirs.row.secret, /^whsec_/);
});

t.test('unknown fields are refused, not dropped', async (t) => {
  const a = await tenant();
  const { row } = await a.dl.webhook_endpoints.create({ project_id: a.project.id, url: 'https://f.example.com/' });
  const cases: [string, Record<string, unknown>, string][] = [
    ['/v1/webhook_endpoints/update', { id: row.id, secret: 'whsec_mine' }, 'body.secret'],
    ['/v1/webhook_endpoints/update', { id: row.id, project_id: a.project.id }, 'body.project_id'],
    [
      '/v1/webhook_endpoints/upsert',
      { project_id: a.project.id, url: 'https://f.example.com/', evnts: [] },
      'body.evnts',
    ],
  ];
  for (const [target, body, field] of cases) {
    const e = await errorOf(a.owner.client.request('POST', target, body));
    t.match(e, { status: 400, code: 'invalid_request' }, `${target} ${field}`);
    t.ok(
      (e.details as { field: string }[]).some((d) => d.field === field),
      `the answer names ${field}`,
    );
  }
  t.strictSame((await a.dl.webhook_endpoints.get({ id: row.id })).row.url, 'https://f.example.com/', 'unchanged');
  t.equal((await a.dl.webhook_endpoints.list({ project_id: a.project.id })).rows.length, 1, 'nothing inserted');
});
