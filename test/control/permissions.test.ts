// The permission matrix of docs/api.md §5.5, generated from the route table: each of the five roles calls
// every route that declares a permission (or a role, docs/api.md §4.13), on fresh fixtures of its own
// organization, and gets the route's success status exactly when ROLE_PERMISSIONS grants that
// permission (or the caller has that role), 403 `forbidden` otherwise. A new write route is covered
// as soon as it declares its permission.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { routeTable, ROLES, can, type OrgRole, type RouteSpec, type Permission } from '@svc-mail/sdk';
import { mintProjectKey } from '../../core/projects.js';
import { startTestService, uniqueEmail, type SignedUp } from '../helpers/service.js';
import { sample } from '../helpers/sample.js';
import { startDnsZone } from '../helpers/dns-zone.js';

t.test('five roles × every route that declares a permission', async (t) => {
  // Verify routes succeed only when their records are published: a loopback zone holds them.
  const zone = await startDnsZone(t);
  const svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort, SVC_MX_HOST: 'mx.matrix.test' } });
  svc.clock.freeze();
  const tick = () => svc.clock.advance(10_000);

  const owner = await svc.signup();
  const { organization: org } = await owner.client.console.organizations.create({ name: 'Matrix Org' });
  const users: Record<OrgRole, SignedUp> = { owner } as Record<OrgRole, SignedUp>;
  for (const role of ROLES.filter((r) => r !== 'owner')) {
    tick();
    const { code } = await owner.client.console.organizations.joinCodes.create({ id: org.id, role });
    const u = await svc.signup();
    tick();
    await u.client.console.organizations.join({ code });
    users[role] = u;
  }

  // Fresh fixtures, made by the owner, for one call of one route.
  async function fixtures(r: RouteSpec, name: string) {
    const needs = (s: string) => r.path.includes(`{${s}}`) || JSON.stringify(r.body ?? {}).includes(`"${s}"`);
    const v: Record<string, unknown> = {
      organizationId: org.id,
      organization_id: org.id,
      name: `n-${randomUUID().slice(0, 8)}`,
      email: uniqueEmail('invitee'),
    };
    v.domain = `d-${randomUUID().slice(0, 8)}.test`;
    const wantsProject =
      r.target?.kind === 'project' ||
      needs('project_id') ||
      name.startsWith('v1.projects.') ||
      name.startsWith('v1.api_keys.') ||
      name.startsWith('v1.suppressions.') ||
      name.startsWith('v1.webhook_endpoints.');
    if (wantsProject) {
      tick();
      const p = await owner.client.console.projects.create({ name: 'fixture', organizationId: org.id });
      v.projectId = p.project.id;
      v.project_id = p.project.id;
      if (needs('keyId') || name.startsWith('v1.api_keys.')) {
        // Renaming works on local keys only (docs/api.md §4.7), rotating on platform keys only.
        const local = name.endsWith('apiKeys.update') || name === 'v1.api_keys.update';
        const k = await mintProjectKey(svc.running.storage.db, svc.running.storage.sealer, {
          projectId: p.project.id,
          label: 'fixture',
          scopes: ['messages:send'],
          managed: local ? 'local' : 'platform',
          now: new Date(svc.clock.now()),
        });
        v.keyId = k.keyId;
        v.keyRowId = k.id;
      }
      // A URL to register, and for a webhook's own routes one registered (docs/api.md §4.8).
      if (name.includes('.webhooks.') || name.startsWith('v1.webhook_endpoints.')) {
        v.url = `https://hooks-${randomUUID().slice(0, 8)}.example.com/h`;
        if (needs('webhookId') || name === 'v1.webhook_endpoints.delete' || name === 'v1.webhook_endpoints.update') {
          tick();
          v.webhookId = (
            await owner.client.console.projects.webhooks.create({ id: p.project.id, url: v.url as string })
          ).id;
        }
      }
      // An address to suppress, and for a suppression's own routes one already suppressed.
      if (needs('address')) v.address = `Rcpt-${randomUUID().slice(0, 8)}@Matrix.Example`;
      if (name === 'console.projects.suppressions.delete') {
        await svc.running.storage.db.query(
          `INSERT INTO suppressions (project_id, address, reason, created_at) VALUES ($1, $2, 'manual', now())`,
          [p.project.id, (v.address as string).replace(/@.*$/, (d) => d.toLowerCase())],
        );
      }
      if (name.startsWith('v1.suppressions.') && needs('id')) {
        const [row] = await svc.running.storage.db.query<{ id: string }>(
          `INSERT INTO suppressions (project_id, address, reason, created_at)
           VALUES ($1, $2, 'manual', now()) RETURNING id`,
          [p.project.id, `s-${randomUUID().slice(0, 8)}@example.com`],
        );
        v.suppressionId = row!.id;
      }
    }
    if (needs('tokenId')) {
      tick();
      v.tokenId = (await owner.client.console.organizations.tokens.create({ id: org.id })).tokenId;
    }
    if (needs('invitationId')) {
      tick();
      v.invitationId = (
        await owner.client.console.organizations.invitations.create({ id: org.id, email: uniqueEmail('inv') })
      ).invitation.id;
    }
    if (needs('codeId')) {
      tick();
      v.codeId = (await owner.client.console.organizations.joinCodes.create({ id: org.id })).joinCode.id;
    }
    if (needs('domainId') && name.includes('customDomains')) {
      tick();
      const domain = `web-${randomUUID().slice(0, 8)}.matrix.test`;
      v.domainId = (
        await owner.client.console.organizations.customDomains.create({ id: org.id, domain })
      ).customDomain.id;
      zone.cname(domain, svc.running.ctx.config.webmailHost);
    } else if (needs('domainId') || needs('capId')) {
      // A claim of its own, its ownership TXT published; for capability routes, a verified claim
      // with both capabilities and their records published.
      tick();
      const domain = `c-${randomUUID().slice(0, 8)}.test`;
      const claim = await owner.client.console.projects.domains.create({ id: v.projectId as string, domain });
      zone.txt(claim.dnsRecords.ownership.host, claim.dnsRecords.ownership.value);
      v.domainId = claim.id;
      if (needs('capId')) {
        tick();
        await owner.client.console.projects.domains.verify({ id: v.projectId as string, domainId: claim.id });
        tick();
        const c = await owner.client.console.projects.domains.capabilities({
          id: v.projectId as string,
          domainId: claim.id,
        });
        const out = c.outbound[0]!;
        zone.txt(out.dnsRecords.dkim.host, out.dnsRecords.dkim.value);
        zone.mx(c.inbound[0]!.domain, 10, 'mx.matrix.test');
        v.capId = name.includes('inbound') ? c.inbound[0]!.id : out.id;
        // Inbox routes (docs/api.md §4.5): a verified inbound capability, and for an inbox's own routes an inbox.
        if (name.includes('.inboxes.')) {
          const capAt = { id: v.projectId as string, capId: v.capId as string };
          await owner.client.console.projects.inbound.verify(capAt);
          v.localpart = `l-${randomUUID().slice(0, 8)}`;
          v.limitGb = 2;
          if (needs('inboxId')) {
            tick();
            const made = await owner.client.console.projects.inbound.inboxes.create({ ...capAt, localpart: 'fixture' });
            v.inboxId = made.inbox.id;
          }
        }
      }
    }
    if (name === 'console.projects.testMessage') {
      // Sending needs a verified sender domain of the project.
      tick();
      const domain = `m-${randomUUID().slice(0, 8)}.test`;
      const claim = await owner.client.console.projects.domains.create({ id: v.projectId as string, domain });
      tick();
      await owner.client.console.projects.domains.outbound.create({ id: v.projectId as string, domainId: claim.id });
      await svc.admin().admin.senderDomains.markVerified({ id: claim.id });
      Object.assign(v, { from: `test@${domain}`, to: 'rcpt@example.com', subject: 'matrix', text: 'hello' });
    }
    if (needs('userId')) {
      tick();
      const { code } = await owner.client.console.organizations.joinCodes.create({ id: org.id, role: 'member' });
      const m = await svc.signup();
      tick();
      await m.client.console.organizations.join({ code });
      v.userId = m.userId;
      v.role = 'auditor';
    }
    // Templates (docs/api.md §4.13): a part to create one with, and for update and delete an own template.
    if (name.startsWith('modules.templates.')) {
      v.text = 'Hello {{name}}';
      if (needs('id')) {
        tick();
        v.templateId = (
          await owner.client.modules.templates.templates.create({
            organizationId: org.id,
            name: 'fixture',
            subject: 's',
            text: 't',
          })
        ).template.id;
      }
    }
    // A data-layer write without a target acts on a row by id (a key, a suppression).
    const rowId = name.startsWith('v1.api_keys.')
      ? v.keyRowId
      : name.startsWith('v1.suppressions.')
        ? v.suppressionId
        : name.startsWith('v1.webhook_endpoints.')
          ? v.webhookId
          : undefined;
    v.id = v.templateId ?? (r.target?.kind === 'organization' ? org.id : (rowId ?? v.projectId ?? org.id));
    return v;
  }

  const routes = (Object.entries(routeTable) as [string, RouteSpec][]).filter(([, r]) => r.permission || r.role);
  t.ok(routes.length >= 15, `${routes.length} routes declare a permission`);

  for (const [name, r] of routes) {
    for (const role of ROLES) {
      const v = await fixtures(r, name);
      const target = r.path.replace(/\{(\w+)\}/g, (_, p: string) => encodeURIComponent(String(v[p])));
      const body = r.body
        ? sample(r.body, {
            ...v,
            role: name.includes('members') ? 'auditor' : role === 'owner' ? 'member' : (v.role ?? 'member'),
            plan: 'payg',
          })
        : undefined;
      const query = r.query ? (sample(r.query, v) as Record<string, unknown>) : {};
      const qs = new URLSearchParams(
        Object.entries(query).map(([k, x]): [string, string] => [k, String(x)]),
      ).toString();
      tick();
      let status: number = r.status ?? 200;
      let code = '';
      try {
        await users[role].client.request(r.method, qs ? `${target}?${qs}` : target, body);
      } catch (e) {
        status = (e as { status: number }).status;
        code = (e as { code: string }).code;
      }
      const allowed = (!r.permission || can(role, r.permission as Permission)) && (!r.role || role === r.role);
      const needed = [r.permission, r.role].filter(Boolean).join(', ');
      if (allowed) t.equal(status, r.status ?? 200, `${role} may ${name} (${needed})${code ? ` — got ${code}` : ''}`);
      else t.same({ status, code }, { status: 403, code: 'forbidden' }, `${role} may not ${name} (${needed})`);
    }
  }
});
