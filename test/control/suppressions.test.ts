// docs/api.md §4.9: a project's suppression list in the console: add (reason default manual), list with
// the address filter, delete by address; addresses normalized (the domain case-insensitive) on
// write, filter and delete; the same rows as the data layer's and sendEmail's.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';

t.test('add, list, filter and delete, normalized', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const S = s.owner.client.console.projects.suppressions;
  const id = s.projectId;

  const { suppression } = await S.create({ id, address: 'Bob@Example.COM' });
  t.match(
    suppression,
    { address: 'Bob@example.com', reason: 'manual', detail: null },
    'domain lower-cased, local part kept, reason manual',
  );
  t.match(suppression.id, /^[0-9a-f-]{36}$/);
  const dup = await errorOf(S.create({ id, address: 'Bob@EXAMPLE.com', reason: 'complaint' }));
  t.match(
    dup,
    { status: 409, code: 'conflict', details: { id: suppression.id, address: 'Bob@example.com' } },
    'the same address in another case: 409 naming the row',
  );
  svc.clock.advance(1000);
  const second = (await S.create({ id, address: 'carol@example.org', reason: 'complaint', detail: 'reported as spam' }))
    .suppression;
  t.match(second, { address: 'carol@example.org', reason: 'complaint', detail: 'reported as spam' });
  t.match(await errorOf(S.create({ id, address: 'not an address' })), {
    status: 400,
    code: 'invalid_request',
    details: [{ field: 'body.address' }],
  });
  t.match(
    await errorOf(S.create({ id, address: 'a@b.example', reason: 'whim' as never })),
    { status: 400 },
    'reasons are docs/api.md §2.2 SuppressionReason',
  );

  t.same(
    (await S.list({ id })).suppressions.map((x) => x.address),
    ['carol@example.org', 'Bob@example.com'],
    'newest first',
  );
  t.same(
    (await S.list({ id, limit: 1 })).suppressions.map((x) => x.address),
    ['carol@example.org'],
    'limit',
  );
  t.same(
    (await S.list({ id, address: 'Bob@EXAMPLE.COM' })).suppressions.map((x) => x.id),
    [suppression.id],
    'filter: the domain in any case',
  );
  t.same((await S.list({ id, address: 'bob@example.com' })).suppressions, [], 'filter: the local part as given');
  t.match(await errorOf(S.list({ id, address: 'nope' })), { status: 400, details: [{ field: 'query.address' }] });

  // The same rows as the data layer's, and sendEmail honours them.
  t.same(
    (await s.owner.client.v1.suppressions.list({ project_id: id })).rows.map((r) => r.id).sort(),
    [suppression.id, second.id].sort(),
  );
  const sent = await s.key.v1.services.sendEmail({
    from: `app@${s.domain}`,
    to: 'Bob@EXAMPLE.COM',
    subject: 's',
    text: 't',
  });
  t.equal(sent.status, 'suppressed', 'a suppressed recipient');

  t.same(await S.delete({ id, address: 'Bob@EXAMPLE.COM' }), { ok: true }, 'delete by address, the domain in any case');
  t.same(
    (await S.list({ id })).suppressions.map((x) => x.address),
    ['carol@example.org'],
  );
  t.match(
    await errorOf(S.delete({ id, address: 'Bob@example.com' })),
    { status: 404, code: 'not_found' },
    'deleting twice',
  );
  t.match(
    await errorOf(S.delete({ id, address: 'Carol@example.org' })),
    { status: 404 },
    'the local part is case-sensitive',
  );
  const again = await s.key.v1.services.sendEmail({
    from: `app@${s.domain}`,
    to: 'Bob@example.com',
    subject: 's',
    text: 't',
  });
  t.equal(again.status, 'queued', 'lifted: mail is sent again');
  // An address with characters that need encoding in a path.
  await S.create({ id, address: 'a+b/c@example.net' });
  t.same(await S.delete({ id, address: 'a+b/c@EXAMPLE.net' }), { ok: true }, 'an encoded address in the path');

  const audit = await svc.running.storage.db.query<{ action: string; project_id: string; target_id: string }>(
    `SELECT action, project_id, target_id FROM audit_log
     WHERE action LIKE 'console.projects.suppressions.%' ORDER BY seq`,
  );
  t.same(
    audit.map((a) => [a.action, a.target_id]),
    [
      ['console.projects.suppressions.create', 'Bob@example.com'],
      ['console.projects.suppressions.create', 'carol@example.org'],
      ['console.projects.suppressions.delete', 'Bob@example.com'],
      ['console.projects.suppressions.create', 'a+b/c@example.net'],
      ['console.projects.suppressions.delete', 'a+b/c@example.net'],
    ],
    'writes audited with the project and the address; reads and refusals not',
  );
  t.ok(audit.every((a) => a.project_id === id));
});

t.test('who may: members read, projects:manage writes, key scopes, other tenants 404', async (t) => {
  const svc = await startTestService(t);
  const owner = await svc.signup();
  const { organization: org } = await owner.client.console.organizations.create({ name: 'Sup Org' });
  const { project } = await owner.client.console.projects.create({ name: 'p', organizationId: org.id });
  await owner.client.console.projects.suppressions.create({ id: project.id, address: 'x@example.com' });

  const { code } = await owner.client.console.organizations.joinCodes.create({ id: org.id, role: 'auditor' });
  const auditor = await svc.signup();
  await auditor.client.console.organizations.join({ code });
  t.equal(
    (await auditor.client.console.projects.suppressions.list({ id: project.id })).suppressions.length,
    1,
    'an auditor reads',
  );
  t.match(
    await errorOf(auditor.client.console.projects.suppressions.create({ id: project.id, address: 'y@example.com' })),
    { status: 403, code: 'forbidden' },
    'an auditor does not write (projects:manage)',
  );
  t.match(
    await errorOf(auditor.client.console.projects.suppressions.delete({ id: project.id, address: 'x@example.com' })),
    { status: 403 },
  );

  const mint = async (scopes: ('suppressions:read' | 'suppressions:write' | 'messages:send')[]) => {
    const k = await owner.client.console.projects.apiKeys.create({ id: project.id, scopes });
    return svc.client({ keyId: k.keyId, secret: k.secret }).console.projects.suppressions;
  };
  const reader = await mint(['suppressions:read']);
  const writer = await mint(['suppressions:write']);
  const sendOnly = await mint(['messages:send']);
  t.equal((await reader.list({ id: project.id })).suppressions.length, 1, 'suppressions:read lists');
  t.match(
    await errorOf(reader.create({ id: project.id, address: 'y@example.com' })),
    { status: 403 },
    'suppressions:read does not add',
  );
  t.match(
    (await writer.create({ id: project.id, address: 'y@example.com' })).suppression,
    { address: 'y@example.com' },
    'suppressions:write adds',
  );
  t.same(await writer.delete({ id: project.id, address: 'y@example.com' }), { ok: true }, 'and lifts');
  t.match(await errorOf(sendOnly.list({ id: project.id })), { status: 403 }, 'a key without the scope');

  const other = await svc.signup();
  const o = await other.client.console.organizations.create({ name: 'Other' });
  const op = await other.client.console.projects.create({ name: 'o', organizationId: o.organization.id });
  const otherKey = await other.client.console.projects.apiKeys.create({
    id: op.project.id,
    scopes: ['suppressions:read', 'suppressions:write'],
  });
  for (const c of [other.client, svc.client({ keyId: otherKey.keyId, secret: otherKey.secret })]) {
    const S = c.console.projects.suppressions;
    t.match(await errorOf(S.list({ id: project.id })), { status: 404 }, 'list: 404');
    t.match(await errorOf(S.create({ id: project.id, address: 'z@example.com' })), { status: 404 }, 'create: 404');
    t.match(await errorOf(S.delete({ id: project.id, address: 'x@example.com' })), { status: 404 }, 'delete: 404');
  }
  t.same(
    (await owner.client.console.projects.suppressions.list({ id: project.id })).suppressions.map((x) => x.address),
    ['x@example.com'],
    'unchanged',
  );
});
