// Message reads: docs/api.md §4.11 (GET /v1/messages/get and /events, scope messages:read), §4.10 (the
// project's messages), §4.14 (admin messages and stats), §5.3 and §5.4; docs/decisions.md #4 and #6.
// Messages are seeded with SQL (sending has its own tests), each read goes through the SDK.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import type { Client } from '@svc-mail/sdk';
import { startTestService, uniqueEmail, type SignedUp, type TestService } from '../helpers/service.js';
import { errorOf } from '../helpers/errors.js';

const ISO_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;
const UNKNOWN_UUID = '00000000-0000-4000-8000-000000000000';
const PASSWORD = 'a long enough password';
const HOUR = 3600_000;
const STATUSES = ['queued', 'sending', 'delivered', 'deferred', 'bounced', 'failed', 'suppressed'] as const;
type Status = (typeof STATUSES)[number];
const ROW_KEYS = [
  'attempts',
  'createdAt',
  'from',
  'id',
  'messageId',
  'metadata',
  'projectId',
  'recipients',
  'scheduledAt',
  'status',
  'subject',
  'tags',
  'to',
  'updatedAt',
];

interface Seed {
  projectId: string;
  organizationId: string;
  status: Status;
  createdAt: Date;
  updatedAt?: Date;
  from?: string;
  to?: string;
  subject?: string;
  messageIdHeader?: string;
  attempts?: number;
}

async function seedMessage(svc: TestService, m: Seed): Promise<string> {
  const id = randomUUID();
  await svc.running.storage.db.query(
    `INSERT INTO messages (id, project_id, organization_id, status, from_header, from_address, to_address, subject,
       message_id_header, return_path, size_bytes, attempts, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, 'sender@example.test', $6, $7, $8, 'bounces@bounces.example.test', 512, $9, $10, $11)`,
    [
      id,
      m.projectId,
      m.organizationId,
      m.status,
      m.from ?? 'sender@example.test',
      m.to ?? 'rcpt@example.net',
      m.subject ?? 'Subject',
      m.messageIdHeader ?? `<${id}@example.test>`,
      m.attempts ?? 0,
      m.createdAt,
      m.updatedAt ?? m.createdAt,
    ],
  );
  return id;
}

async function seedEvent(
  svc: TestService,
  e: { id: string; messageId: string; projectId: string; type: string; createdAt: Date; detail: unknown },
) {
  await svc.running.storage.db.query(
    `INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
     VALUES ($1, $2, $3, $4, $5::jsonb, $6)`,
    [e.id, e.messageId, e.projectId, e.type, e.detail === null ? null : JSON.stringify(e.detail), e.createdAt],
  );
}

/** A staff user made through POST /admin/v1/users, logged in with its password. */
async function staffOf(svc: TestService): Promise<Client> {
  const email = uniqueEmail('staff');
  await svc.admin().admin.users.create({ email, password: PASSWORD, role: 'staff' });
  const login = await svc.client().auth.login({ email, password: PASSWORD });
  return svc.client({ keyId: login.accountToken.tokenId, secret: login.accountToken.secret });
}

async function orgWithProject(svc: TestService, tag: string) {
  const owner = await svc.signup(uniqueEmail(`${tag}-owner`));
  const { organization, organizationToken } = await owner.client.console.organizations.create({ name: `${tag} org` });
  const { project, apiKey } = await owner.client.console.projects.create({
    name: `${tag} project`,
    organizationId: organization.id,
  });
  return {
    owner,
    organizationId: organization.id,
    projectId: project.id,
    orgClient: svc.client({ keyId: organizationToken.tokenId, secret: organizationToken.secret }),
    /** The project's first key: scope project:admin only. */
    adminKeyClient: svc.client({ keyId: apiKey.keyId, secret: apiKey.secret }),
  };
}

async function keyWith(
  svc: TestService,
  owner: SignedUp,
  projectId: string,
  scopes: ('messages:read' | 'messages:send' | 'project:admin')[],
) {
  const k = await owner.client.console.projects.apiKeys.create({ id: projectId, scopes });
  return svc.client({ keyId: k.keyId, secret: k.secret });
}

async function memberOf(svc: TestService, owner: SignedUp, organizationId: string, role: string): Promise<SignedUp> {
  const { code } = await owner.client.console.organizations.joinCodes.create({ id: organizationId, role });
  const u = await svc.signup(uniqueEmail(role));
  await u.client.console.organizations.join({ code });
  return u;
}

const iso = (ms: number) => new Date(ms).toISOString();

t.test('message reads: shapes, order and who may read', async (t) => {
  const svc = await startTestService(t);
  const db = svc.running.storage.db;
  const a = await orgWithProject(svc, 'a');
  const b = await orgWithProject(svc, 'b');
  const readKey = await keyWith(svc, a.owner, a.projectId, ['messages:read']);
  const sendKey = await keyWith(svc, a.owner, a.projectId, ['messages:send']);
  const bReadKey = await keyWith(svc, b.owner, b.projectId, ['messages:read']);

  const t0 = svc.clock.now();
  const id = await seedMessage(svc, {
    projectId: a.projectId,
    organizationId: a.organizationId,
    status: 'delivered',
    from: '"Ann Example" <ann@sender.example.test>',
    to: 'bob@example.net',
    subject: 'Your receipt',
    messageIdHeader: '<r-1@sender.example.test>',
    attempts: 2,
    createdAt: new Date(t0 - 10 * 60_000),
    updatedAt: new Date(t0 - 60_000),
  });
  // Events in insertion (seq) order; the first three share one millisecond and their ids sort the
  // other way round, so only ordering by seq gives this order.
  const eventIds = [randomUUID(), randomUUID(), randomUUID(), randomUUID()].sort().reverse();
  const events = [
    { type: 'queued', at: t0 - 10 * 60_000, detail: null },
    { type: 'sending', at: t0 - 10 * 60_000, detail: { attempt: 1 } },
    {
      type: 'deferred',
      at: t0 - 10 * 60_000,
      detail: { attempt: 1, reply: '451 4.7.1 Greylisted, try again later', nextAttemptAt: iso(t0 - 9 * 60_000) },
    },
    { type: 'delivered', at: t0 - 60_000, detail: { attempt: 2, reply: '250 2.0.0 Ok: queued as 4AB12' } },
  ];
  for (const [i, e] of events.entries()) {
    await seedEvent(svc, {
      id: eventIds[i]!,
      messageId: id,
      projectId: a.projectId,
      type: e.type,
      createdAt: new Date(e.at),
      detail: e.detail,
    });
  }
  const quiet = await seedMessage(svc, {
    projectId: a.projectId,
    organizationId: a.organizationId,
    status: 'queued',
    createdAt: new Date(t0),
  });
  const bMessage = await seedMessage(svc, {
    projectId: b.projectId,
    organizationId: b.organizationId,
    status: 'queued',
    createdAt: new Date(t0),
  });

  t.test('get: docs/decisions.md #4 row', async (t) => {
    const res = await readKey.v1.messages.get({ id });
    t.strictSame(Object.keys(res), ['row']);
    t.strictSame(Object.keys(res.row).sort(), ROW_KEYS);
    t.strictSame(res.row, {
      id,
      projectId: a.projectId,
      status: 'delivered',
      from: '"Ann Example" <ann@sender.example.test>',
      to: 'bob@example.net',
      recipients: [{ address: 'bob@example.net', kind: 'to', status: 'delivered' }],
      subject: 'Your receipt',
      messageId: '<r-1@sender.example.test>',
      attempts: 2,
      tags: [],
      metadata: {},
      scheduledAt: null,
      createdAt: iso(t0 - 10 * 60_000),
      updatedAt: iso(t0 - 60_000),
    });
    t.match(res.row.createdAt, ISO_RE);
  });

  t.test('events: oldest first by seq, each { id, type, createdAt, detail }', async (t) => {
    const res = await readKey.v1.messages.events({ id });
    t.strictSame(Object.keys(res), ['events']);
    t.strictSame(
      res.events,
      events.map((e, i) => ({ id: eventIds[i], type: e.type, createdAt: iso(e.at), detail: e.detail })),
    );
    t.strictSame(
      (await readKey.v1.messages.events({ id: quiet })).events,
      [],
      'a message without events: an empty list',
    );
  });

  t.test('a project key needs messages:read', async (t) => {
    for (const [who, c] of [
      ['messages:send', sendKey],
      ['project:admin', a.adminKeyClient],
    ] as const) {
      t.match(await errorOf(c.v1.messages.get({ id })), { status: 403, code: 'forbidden' }, `get with ${who} only`);
      t.match(
        await errorOf(c.v1.messages.events({ id })),
        { status: 403, code: 'forbidden' },
        `events with ${who} only`,
      );
    }
  });

  t.test('404 for every id the caller may not read, all alike', async (t) => {
    const other = await errorOf(bReadKey.v1.messages.get({ id }));
    t.match(other, { status: 404, code: 'not_found' }, "another project's key");
    t.match(
      await errorOf(bReadKey.v1.messages.events({ id })),
      { status: 404, code: 'not_found' },
      "another project's key: events",
    );
    t.equal((await bReadKey.v1.messages.get({ id: bMessage })).row.id, bMessage, 'that key reads its own project');
    t.match(
      await errorOf(readKey.v1.messages.get({ id: bMessage })),
      { status: 404, code: 'not_found' },
      'and the other way round',
    );

    const unknown = await errorOf(readKey.v1.messages.get({ id: UNKNOWN_UUID }));
    t.match(unknown, { status: 404, code: 'not_found' }, 'unknown id');
    t.equal(unknown.message, other.message, "an unknown id and another project's look the same");
    t.match(
      await errorOf(readKey.v1.messages.events({ id: UNKNOWN_UUID })),
      { status: 404, code: 'not_found' },
      'unknown id: events',
    );
    for (const bad of ['not-a-uuid', `${id}x`, "' OR 1=1 --"]) {
      t.match(
        await errorOf(readKey.v1.messages.get({ id: bad })),
        { status: 404, code: 'not_found' },
        `non-UUID ${JSON.stringify(bad)}`,
      );
      t.match(
        await errorOf(readKey.v1.messages.events({ id: bad })),
        { status: 404, code: 'not_found' },
        `non-UUID ${JSON.stringify(bad)}: events`,
      );
    }
    t.match(
      await errorOf(readKey.request('GET', '/v1/messages/get')),
      { status: 400, code: 'invalid_request' },
      'no id at all: 400',
    );

    t.match(
      await errorOf(b.owner.client.v1.messages.get({ id })),
      { status: 404, code: 'not_found' },
      'a non-member account token',
    );
    t.match(
      await errorOf(b.orgClient.v1.messages.events({ id })),
      { status: 404, code: 'not_found' },
      "another organization's token",
    );
  });

  t.test('console credentials: members, the org token, staff, the platform key', async (t) => {
    const member = await memberOf(svc, a.owner, a.organizationId, 'member');
    const auditor = await memberOf(svc, a.owner, a.organizationId, 'auditor');
    const staff = await staffOf(svc);
    const readers: [string, Client][] = [
      ['owner', a.owner.client],
      ['member', member.client],
      ['auditor (reads need membership only)', auditor.client],
      ['organization token', a.orgClient],
      ['staff token', staff],
      ['platform key', svc.admin()],
    ];
    for (const [who, c] of readers) {
      t.equal((await c.v1.messages.get({ id })).row.id, id, `${who} reads the message`);
      t.equal((await c.v1.messages.events({ id })).events.length, events.length, `${who} reads its events`);
    }
  });

  t.test("a soft-deleted project's messages are gone", async (t) => {
    const { project } = await a.owner.client.console.projects.create({
      name: 'short-lived',
      organizationId: a.organizationId,
    });
    const gone = await seedMessage(svc, {
      projectId: project.id,
      organizationId: a.organizationId,
      status: 'queued',
      createdAt: new Date(t0),
    });
    t.equal((await a.owner.client.v1.messages.get({ id: gone })).row.id, gone, 'readable while the project lives');
    await a.owner.client.console.projects.delete({ id: project.id });
    t.match(await errorOf(a.owner.client.v1.messages.get({ id: gone })), { status: 404, code: 'not_found' });
  });

  t.test('console project messages: newest first, status filter, limit', async (t) => {
    const c = await orgWithProject(svc, 'c');
    const tc = svc.clock.now();
    const seeded: { id: string; status: Status; at: number }[] = [];
    for (const [i, status] of (['queued', 'delivered', 'bounced', 'delivered', 'deferred'] as const).entries()) {
      const at = tc - (10 - i) * 60_000;
      seeded.push({
        id: await seedMessage(svc, {
          projectId: c.projectId,
          organizationId: c.organizationId,
          status,
          createdAt: new Date(at),
        }),
        status,
        at,
      });
    }
    const newestFirst = [...seeded].reverse();

    const all = await c.owner.client.console.projects.messages({ id: c.projectId });
    t.strictSame(Object.keys(all), ['messages', 'nextCursor']);
    t.strictSame(
      all.messages.map((m) => m.id),
      newestFirst.map((s) => s.id),
      'newest first, only this project',
    );
    t.strictSame(Object.keys(all.messages[0]!).sort(), ROW_KEYS, 'rows have the shape of the get row');
    t.strictSame(
      all.messages[0],
      (await c.owner.client.v1.messages.get({ id: newestFirst[0]!.id })).row,
      'and the same values',
    );

    const delivered = await c.owner.client.console.projects.messages({ id: c.projectId, status: 'delivered' });
    t.strictSame(
      delivered.messages.map((m) => m.id),
      newestFirst.filter((s) => s.status === 'delivered').map((s) => s.id),
      'status filter',
    );
    t.strictSame(
      (await c.owner.client.console.projects.messages({ id: c.projectId, status: 'failed' })).messages,
      [],
      'a status with none',
    );
    t.match(
      await errorOf(c.owner.client.request('GET', `/console/v1/projects/${c.projectId}/messages?status=lost`)),
      { status: 400, code: 'invalid_request' },
      'a status outside MessageStatus',
    );
    t.strictSame(
      (await c.owner.client.console.projects.messages({ id: c.projectId, limit: 2 })).messages.map((m) => m.id),
      newestFirst.slice(0, 2).map((s) => s.id),
      'limit 2: the two newest',
    );
    t.match(await errorOf(c.owner.client.console.projects.messages({ id: c.projectId, limit: 0 })), {
      status: 400,
      code: 'invalid_request',
    });

    // Who may read the view (docs/api.md §4.10: account token, project:admin, staff).
    t.equal(
      (await c.adminKeyClient.console.projects.messages({ id: c.projectId })).messages.length,
      5,
      'a project:admin key',
    );
    t.equal(
      (await c.orgClient.console.projects.messages({ id: c.projectId })).messages.length,
      5,
      'the organization token',
    );
    t.equal((await svc.admin().console.projects.messages({ id: c.projectId })).messages.length, 5, 'the platform key');
    const cRead = await keyWith(svc, c.owner, c.projectId, ['messages:read']);
    t.match(
      await errorOf(cRead.console.projects.messages({ id: c.projectId })),
      { status: 403, code: 'forbidden' },
      'messages:read is not project:admin',
    );
    t.match(
      await errorOf(a.owner.client.console.projects.messages({ id: c.projectId })),
      { status: 404, code: 'not_found' },
      'a non-member',
    );
    t.match(
      await errorOf(a.adminKeyClient.console.projects.messages({ id: c.projectId })),
      { status: 404, code: 'not_found' },
      "another project's key",
    );

    // docs/decisions.md #6: default 50, clamped at 200.
    await db.query(
      `INSERT INTO messages (id, project_id, organization_id, status, from_header, from_address, to_address, subject,
         message_id_header, return_path, size_bytes, attempts, created_at, updated_at)
       SELECT gen_random_uuid(), $1, $2, 'queued', 'bulk@example.test', 'bulk@example.test', 'r' || g || '@example.net',
         'bulk ' || g, '<bulk-' || g || '@example.test>', 'bounces@example.test', 100, 0,
         $3::timestamptz - g * interval '1 hour', $3::timestamptz
       FROM generate_series(1, 205) AS g`,
      [c.projectId, c.organizationId, new Date(tc)],
    );
    const byDefault = await c.owner.client.console.projects.messages({ id: c.projectId });
    t.equal(byDefault.messages.length, 50, 'default limit 50');
    t.strictSame(
      byDefault.messages.slice(0, 5).map((m) => m.id),
      newestFirst.map((s) => s.id),
      'the newest are still first',
    );
    const times = byDefault.messages.map((m) => Date.parse(m.createdAt));
    t.ok(
      times.every((x, i) => i === 0 || x <= times[i - 1]!),
      'createdAt never increases down the list',
    );
    t.equal(
      (await c.owner.client.console.projects.messages({ id: c.projectId, limit: 100000 })).messages.length,
      200,
      'a large limit is clamped to 200',
    );
    t.equal((await c.owner.client.console.projects.messages({ id: c.projectId, limit: 200 })).messages.length, 200);
    t.equal((await c.owner.client.console.projects.messages({ id: c.projectId, limit: 199 })).messages.length, 199);
  });
});

t.test('admin: messages across projects, stats on the request clock', async (t) => {
  // A service of its own: the admin views are platform-wide, so counts here are exact.
  const svc = await startTestService(t);
  svc.clock.freeze();
  const admin = svc.admin();
  const staff = await staffOf(svc);
  const a = await orgWithProject(svc, 'a');
  const b = await orgWithProject(svc, 'b');
  const { project: doomed } = await a.owner.client.console.projects.create({
    name: 'doomed',
    organizationId: a.organizationId,
  });

  const zero = Object.fromEntries(STATUSES.map((s) => [s, 0]));
  const empty = await admin.admin.stats();
  t.strictSame(
    empty,
    { projects: 3, suppressions: 0, messages: zero, last24h: zero },
    'every status present, zero included',
  );

  const t0 = svc.clock.now();
  const seed = (p: { projectId: string; organizationId: string }, status: Status, offset: number) =>
    seedMessage(svc, { ...p, status, createdAt: new Date(t0 + offset) });
  const A = await seed(a, 'delivered', -30 * HOUR);
  const B = await seed(a, 'delivered', -1 * HOUR);
  const C = await seed(b, 'bounced', -2 * HOUR);
  const D = await seed(b, 'queued', -23.5 * HOUR);
  const E = await seed(a, 'deferred', 2 * HOUR); // stamped after the request's now (another node's clock ahead)
  const F = await seed({ projectId: doomed.id, organizationId: a.organizationId }, 'failed', -3 * HOUR);
  for (const [p, address] of [
    [a.projectId, 'x@example.net'],
    [a.projectId, 'y@example.net'],
    [b.projectId, 'x@example.net'],
    [doomed.id, 'z@example.net'],
  ] as const) {
    await svc.running.storage.db.query(
      `INSERT INTO suppressions (project_id, address, reason, detail, created_at) VALUES ($1, $2, 'manual', NULL, $3)`,
      [p, address, new Date(t0)],
    );
  }
  await a.owner.client.console.projects.delete({ id: doomed.id });

  t.test('admin.messages.list: newest first, filters, limit', async (t) => {
    const ids = (r: { messages: { id: string }[] }) => r.messages.map((m) => m.id);
    const all = await admin.admin.messages.list();
    t.strictSame(Object.keys(all), ['messages', 'nextCursor']);
    t.strictSame(ids(all), [E, B, C, F, D, A], "newest first across projects (a deleted project's history included)");
    t.strictSame(Object.keys(all.messages[0]!).sort(), ROW_KEYS);
    t.strictSame(ids(await staff.admin.messages.list()), ids(all), 'a staff token sees the same');
    t.strictSame(ids(await admin.admin.messages.list({ projectId: a.projectId })), [E, B, A], 'by project');
    t.strictSame(ids(await admin.admin.messages.list({ status: 'delivered' })), [B, A], 'by status');
    t.strictSame(ids(await admin.admin.messages.list({ projectId: b.projectId, status: 'bounced' })), [C], 'by both');
    t.strictSame(
      ids(await admin.admin.messages.list({ projectId: b.projectId, status: 'delivered' })),
      [],
      'by both, none',
    );
    t.strictSame(ids(await admin.admin.messages.list({ projectId: UNKNOWN_UUID })), [], 'an unknown project');
    t.strictSame(ids(await admin.admin.messages.list({ limit: 2 })), [E, B], 'limit');
    t.strictSame(
      ids(await admin.admin.messages.list({ limit: 100000 })),
      ids(all),
      'a large limit is clamped, not refused',
    );
    t.match(await errorOf(admin.admin.messages.list({ limit: 0 })), { status: 400, code: 'invalid_request' });
    t.match(
      await errorOf(admin.request('GET', '/admin/v1/messages?status=lost')),
      { status: 400, code: 'invalid_request' },
      'unknown status',
    );
    t.match(
      await errorOf(admin.request('GET', '/admin/v1/messages?projectId=nope')),
      { status: 400, code: 'invalid_request' },
      'projectId not a UUID',
    );
  });

  t.test('admin.stats: totals, and the last 24 h on the request clock', async (t) => {
    const counts = (c: Partial<Record<Status, number>>) => ({ ...zero, ...c });
    // Live projects (a, b; doomed is deleted) and the suppressions of live projects.
    const base = {
      projects: 2,
      suppressions: 3,
      messages: counts({ delivered: 2, bounced: 1, queued: 1, deferred: 1, failed: 1 }),
    };
    // Window (t0 − 24 h, t0]: B, C, D, F; E lies ahead of now, A before the window.
    t.strictSame(await admin.admin.stats(), {
      ...base,
      last24h: counts({ delivered: 1, bounced: 1, queued: 1, failed: 1 }),
    });
    t.strictSame(await staff.admin.stats(), await admin.admin.stats(), 'a staff token sees the same');
    // SQL now() is the real time, still near t0: only the service clock moves these windows.
    svc.clock.advance(1 * HOUR); // (t0 − 23 h, t0 + 1 h]: D has left
    t.strictSame(await admin.admin.stats(), { ...base, last24h: counts({ delivered: 1, bounced: 1, failed: 1 }) });
    svc.clock.advance(2 * HOUR); // (t0 − 21 h, t0 + 3 h]: E has come in
    t.strictSame(await admin.admin.stats(), {
      ...base,
      last24h: counts({ delivered: 1, bounced: 1, failed: 1, deferred: 1 }),
    });
    svc.clock.advance(22 * HOUR); // (t0 + 1 h, t0 + 25 h]: only E
    t.strictSame(await admin.admin.stats(), { ...base, last24h: counts({ deferred: 1 }) });
  });

  t.test('admin routes: a customer token is 403, other credentials 401', async (t) => {
    const calls: [string, (c: Client) => Promise<unknown>][] = [
      ['admin.stats', (c) => c.admin.stats()],
      ['admin.messages.list', (c) => c.admin.messages.list()],
    ];
    const member = await memberOf(svc, a.owner, a.organizationId, 'admin');
    for (const [name, call] of calls) {
      t.match(
        await errorOf(call(a.owner.client)),
        { status: 403, code: 'forbidden' },
        `${name}: an organization owner's token`,
      );
      t.match(
        await errorOf(call(member.client)),
        { status: 403, code: 'forbidden' },
        `${name}: an organization admin's token`,
      );
      t.match(await errorOf(call(a.orgClient)), { status: 401, code: 'unauthorized' }, `${name}: organization token`);
      t.match(await errorOf(call(a.adminKeyClient)), { status: 401, code: 'unauthorized' }, `${name}: project key`);
      t.match(await errorOf(call(svc.client())), { status: 401, code: 'unauthorized' }, `${name}: unsigned`);
    }
  });
});
