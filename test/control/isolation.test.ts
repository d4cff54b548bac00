// The isolation matrix, generated from the route table: every route that takes an id (a path
// parameter, or an `id`, `organizationId`, `project_id` or `organization_id` field), called by the
// credentials of another organization with the ids of a victim organization, answers 404 where the
// credential kind is accepted (401 where it is not, 403 for staff-only routes) and never leaks data.
// A new route is covered without anyone adding it here; if the test cannot build a request for it,
// it fails and says which id it is missing.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { routeTable, type RouteSpec, type Client } from '@svc-mail/sdk';
import { createInbox } from '../../storage/pg/inboxes.js';
import { startTestService } from '../helpers/service.js';
import { sample } from '../helpers/sample.js';

const ID_FIELDS = ['id', 'organizationId', 'projectId', 'project_id', 'organization_id'];

function takesAnId(r: RouteSpec): boolean {
  if (/\{\w+\}/.test(r.path)) return true;
  const fields = [...Object.keys(r.query?.properties ?? {}), ...Object.keys(r.body?.properties ?? {})];
  return fields.some((f) => ID_FIELDS.includes(f));
}

t.test('another organization gets 404 and no data on every id-taking route', async (t) => {
  const svc = await startTestService(t);
  svc.clock.freeze();
  // Requests are spread over simulated time so no credential's rate-limit bucket runs dry.
  const tick = () => svc.clock.advance(10_000);

  // The victim: an organization with a project, keys, tokens, an invitation, a join code and a second member.
  const owner = await svc.signup();
  const { organization: org, organizationToken: orgToken } = await owner.client.console.organizations.create({
    name: 'Victim Org',
  });
  const { project, apiKey } = await owner.client.console.projects.create({
    name: 'Victim Project',
    organizationId: org.id,
  });
  const extraKey = await owner.client.console.projects.apiKeys.create({ id: project.id, label: 'victim-send' });
  const { invitation } = await owner.client.console.organizations.invitations.create({
    id: org.id,
    email: 'invitee@example.test',
  });
  const { joinCode } = await owner.client.console.organizations.joinCodes.create({ id: org.id });
  const member = await svc.signup();
  const { code } = await owner.client.console.organizations.joinCodes.create({ id: org.id, role: 'member' });
  await member.client.console.organizations.join({ code });
  const claim = await owner.client.console.projects.domains.create({ id: project.id, domain: 'victim-domain.test' });
  const withCaps = await owner.client.console.projects.domains.capabilities({ id: project.id, domainId: claim.id });
  const outboundCap = withCaps.outbound[0]!;
  const inboundCap = withCaps.inbound[0]!;
  // An inbox of the victim's inbound capability (docs/api.md §4.5), seeded: verifying receiving needs DNS.
  const victimInbox = await createInbox(svc.running.storage.db, {
    capabilityId: inboundCap.id,
    localpart: 'victim-inbox',
    type: 'individual',
    passwordHash: null,
    initialPasswordSealed: null,
    now: new Date(),
  });
  const { customDomain } = await owner.client.console.organizations.customDomains.create({
    id: org.id,
    domain: 'webmail.victim-domain.test',
  });
  const victimTokens = (await owner.client.console.accountTokens.list()).tokens;
  const victimAudit = await svc.running.storage.db.query<{ id: string }>(
    'SELECT id FROM audit_log WHERE organization_id = $1 LIMIT 1',
    [org.id],
  );
  // A sent message of the victim, for /v1/messages/get and /events (seeded: sending is not under test here).
  const victimMessage = randomUUID();
  await svc.running.storage.db.query(
    `INSERT INTO messages (id, project_id, organization_id, status, from_header, from_address, to_address, subject,
       message_id_header, return_path, size_bytes, created_at, updated_at)
     VALUES ($1, $2, $3, 'delivered', 'a@victim-domain.test', 'a@victim-domain.test', 'invitee@example.test',
       'Victim subject', '<m@victim-domain.test>', 'b@bounces.victim-domain.test', 100, now(), now())`,
    [victimMessage, project.id, org.id],
  );
  // Its event, its idempotency key and a suppression of the project, for the data-layer tables.
  const victimEvent = randomUUID();
  await svc.running.storage.db.query(
    `INSERT INTO message_events (id, message_id, project_id, type, detail, created_at)
     VALUES ($1, $2, $3, 'delivered', '{"reply":"250 ok"}', now())`,
    [victimEvent, victimMessage, project.id],
  );
  await svc.running.storage.db.query(
    `INSERT INTO idempotency_keys (project_id, key, body_hash, message_id, created_at, expires_at)
     VALUES ($1, 'victim-idempotency-key', 'x', $2, now(), now() + interval '1 day')`,
    [project.id, victimMessage],
  );
  const [victimSuppression] = await svc.running.storage.db.query<{ id: string }>(
    `INSERT INTO suppressions (project_id, address, reason, created_at)
     VALUES ($1, 'victim-suppressed@example.test', 'hard_bounce', now()) RETURNING id`,
    [project.id],
  );
  // A private template of the victim (docs/api.md §4.13), for the template routes' `id`.
  const { template: victimTemplate } = await owner.client.modules.templates.templates.create({
    organizationId: org.id,
    name: 'Victim template',
    subject: 'Victim template subject',
    text: 'victim template body',
  });

  // A webhook of the victim's project and one delivery attempt of its event (docs/api.md §4.8, §6 rule 3).
  const victimHook = await owner.client.console.projects.webhooks.create({
    id: project.id,
    url: 'https://victim-hooks.example.test/h',
  });
  const [victimDelivery] = await svc.running.storage.db.query<{ id: string }>(
    `INSERT INTO webhook_deliveries
       (id, webhook_id, endpoint_id, project_id, event_id, event_type, attempt, status, status_code, created_at)
     VALUES (gen_random_uuid(), 'msg_victim', $1, $2, $3, 'delivered', 1, 'succeeded', 200, now()) RETURNING id`,
    [victimHook.id, project.id, victimEvent],
  );

  // Ids a data-layer route of each table would act on, by table.
  const rowIds: Record<string, string> = {
    webhook_endpoints: victimHook.id,
    webhook_deliveries: victimDelivery!.id,
    projects: project.id,
    api_keys: extraKey.id,
    users: owner.userId,
    account_tokens: victimTokens[0]!.id,
    organizations: org.id,
    organization_members: member.userId,
    organization_tokens: orgToken.id,
    audit_log: victimAudit[0]!.id,
    rate_limits: owner.tokenId,
    sender_domains: outboundCap.id,
    messages: victimMessage,
    message_events: victimEvent,
    idempotency_keys: `${project.id}:victim-idempotency-key`,
    suppressions: victimSuppression!.id,
  };
  const paramValues: Record<string, string> = {
    tokenId: orgToken.tokenId,
    invitationId: invitation.id,
    codeId: joinCode.id,
    userId: member.userId,
    keyId: extraKey.keyId,
    webhookId: victimHook.id,
    inboxId: victimInbox!.inbox.id,
  };
  // Parameters whose victim value depends on the route: {domainId} is a claim under projects and a
  // custom webmail domain under organizations; {capId} an outbound or an inbound capability.
  function paramFor(name: string, param: string, id: string): string {
    if (param === 'id') return id;
    if (param === 'domainId') return name.includes('customDomains') ? customDomain.id : claim.id;
    if (param === 'capId') return name.includes('inbound') ? inboundCap.id : outboundCap.id;
    if (param === 'address') return 'victim-suppressed@example.test';
    const v = paramValues[param];
    if (!v) throw new Error(`isolation matrix: no victim value for path parameter {${param}} of ${name}; add one`);
    return v;
  }
  function idFor(name: string, r: RouteSpec): string {
    const hasId = r.path.includes('{id}') || 'id' in (r.query?.properties ?? {}) || 'id' in (r.body?.properties ?? {});
    // Template routes name the organization in organizationId and the template in id.
    if (name.startsWith('modules.templates.') && hasId) return victimTemplate.id;
    if (!hasId || r.target?.kind === 'organization') return org.id;
    if (r.target?.kind === 'project') return project.id;
    const table = /^v1\.(\w+)\.\w+$/.exec(name)?.[1];
    if (table && table !== 'services') {
      const id = rowIds[table];
      if (!id) throw new Error(`isolation matrix: no victim row id for data-layer table "${table}"; add one to rowIds`);
      return id;
    }
    if (name.startsWith('console.accountTokens.') || name.startsWith('admin.accountTokens.')) return owner.tokenId;
    if (name.startsWith('admin.users.')) return owner.userId;
    if (name.startsWith('admin.senderDomains.')) return outboundCap.id;
    if (name.startsWith('admin.organizations.')) return org.id;
    throw new Error(
      `isolation matrix: cannot tell which victim id route ${name} (${r.method} ${r.path}) takes; teach idFor`,
    );
  }

  // The attackers: another organization's owner, its organization token and its project key.
  const attacker = await svc.signup();
  const a = await attacker.client.console.organizations.create({ name: 'Attacker Org' });
  const ap = await attacker.client.console.projects.create({
    name: 'Attacker Project',
    organizationId: a.organization.id,
  });
  // Every scope, so that a missing scope (403) never stands in for the 404 under test.
  const apKey = await attacker.client.console.projects.apiKeys.create({
    id: ap.project.id,
    scopes: ['messages:send', 'messages:read', 'suppressions:read', 'suppressions:write', 'project:admin'],
  });
  const attackers: { kind: 'account_token' | 'organization_token' | 'project_api_key'; client: Client }[] = [
    { kind: 'account_token', client: attacker.client },
    {
      kind: 'organization_token',
      client: svc.client({ keyId: a.organizationToken.tokenId, secret: a.organizationToken.secret }),
    },
    { kind: 'project_api_key', client: svc.client({ keyId: apKey.keyId, secret: apKey.secret }) },
  ];

  const secrets = [
    org.id,
    project.id,
    org.name,
    project.name,
    owner.email,
    member.email,
    apiKey.keyId,
    extraKey.keyId,
    orgToken.tokenId,
    'invitee@example.test',
    'victim-domain.test',
    outboundCap.selector,
    'Victim subject',
    victimMessage,
    victimEvent,
    'victim-idempotency-key',
    'victim-suppressed@example.test',
    victimHook.id,
    victimHook.secret,
    'victim-hooks',
    victimDelivery!.id,
    victimTemplate.id,
    'Victim template',
    'victim template body',
    'victim-inbox',
  ];
  const covered: string[] = [];

  for (const [name, r] of Object.entries(routeTable) as [string, RouteSpec][]) {
    if (r.auth === 'public' || !takesAnId(r)) continue;
    covered.push(name);
    const id = idFor(name, r);
    const known = {
      ...paramValues,
      id,
      organizationId: org.id,
      organization_id: org.id,
      projectId: project.id,
      project_id: project.id,
      name: 'renamed-by-attacker',
    };
    const target = r.path.replace(/\{(\w+)\}/g, (_, p: string) => encodeURIComponent(paramFor(name, p, id)));
    const query = r.query ? (sample(r.query, known) as Record<string, unknown>) : {};
    const qs = new URLSearchParams(Object.entries(query).map(([k, v]): [string, string] => [k, String(v)])).toString();
    const body = r.body ? sample(r.body, known) : undefined;

    for (const { kind, client } of attackers) {
      tick();
      const accepted = r.auth.includes(kind);
      const staffOnly = !accepted && kind === 'account_token' && r.auth.includes('staff');
      const expected = accepted ? 404 : staffOnly ? 403 : 401;
      let status = 200;
      let text = '';
      try {
        text = JSON.stringify(await client.request(r.method, qs ? `${target}?${qs}` : target, body));
      } catch (e) {
        const err = e as { status?: number; code?: string; details?: unknown; message?: string };
        status = err.status ?? 0;
        text = JSON.stringify({ code: err.code, message: err.message, details: err.details });
      }
      t.equal(status, expected, `${name} as another org's ${kind}: ${expected}`);
      const leaked = secrets.filter((s) => text.includes(s));
      t.same(leaked, [], `${name} as ${kind}: nothing of the victim in the answer`);
    }
  }

  t.ok(covered.length >= 20, `the matrix covered ${covered.length} routes`);
  t.ok(
    covered.includes('console.projects.create') && covered.includes('console.organizations.get'),
    'organizationId-in-body and {id} routes are both covered',
  );

  // Nothing of the victim changed.
  tick();
  const after = await owner.client.console.organizations.get({ id: org.id });
  t.equal(after.organization.name, 'Victim Org', 'organization not renamed');
  t.equal(after.organization.plan, 'free', 'plan not changed');
  t.same(after.members.map((m) => m.userId).sort(), [owner.userId, member.userId].sort(), 'members unchanged');
  t.ok(
    after.tokens.some((x) => x.tokenId === orgToken.tokenId),
    'organization token not revoked',
  );
  t.ok(
    after.invitations.some((i) => i.id === invitation.id),
    'invitation still pending',
  );
  tick();
  const codes = (await owner.client.console.organizations.joinCodes.list({ id: org.id })).joinCodes;
  t.equal(codes.find((c) => c.id === joinCode.id)?.status, 'active', 'join code still active');
  tick();
  const p = await owner.client.console.projects.get({ id: project.id });
  t.equal(p.project.name, 'Victim Project', 'project not renamed or deleted');
  t.ok(
    p.apiKeys.some((k) => k.keyId === extraKey.keyId),
    'project key not revoked',
  );
  tick();
  const claimAfter = await owner.client.console.projects.domains.get({ id: project.id, domainId: claim.id });
  t.equal(claimAfter.status, 'pending', 'claim not verified by anyone else');
  t.same(
    [claimAfter.outbound.length, claimAfter.inbound.length, claimAfter.outbound[0]?.status],
    [1, 1, 'pending'],
    'capabilities untouched',
  );
  tick();
  const customAfter = (await owner.client.console.organizations.customDomains.list({ id: org.id })).customDomains;
  t.ok(
    customAfter.some((d) => d.id === customDomain.id),
    'custom domain not deleted',
  );
  tick();
  t.same(
    (await owner.client.v1.suppressions.list()).rows.map((r) => r.address),
    ['victim-suppressed@example.test'],
    'suppression not deleted, none added',
  );
  tick();
  t.same(
    (await owner.client.console.projects.webhooks.list({ id: project.id })).webhooks.map((w) => w.id),
    [victimHook.id],
    'webhook not deleted, none added',
  );
  tick();
  t.match(
    (await owner.client.modules.templates.templates.get({ organizationId: org.id, id: victimTemplate.id })).template,
    { name: 'Victim template', version: 1, is_public: false },
    'template not changed, published or deleted',
  );
  tick();
  t.match(
    await svc.client({ keyId: extraKey.keyId, secret: extraKey.secret }).v1.services.whoami(),
    { projectId: project.id },
    'victim key still works',
  );
  tick();
  t.match(await owner.client.v1.services.whoami(), { userId: owner.userId }, "victim's account token still works");
});
