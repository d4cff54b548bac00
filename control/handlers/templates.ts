// docs/api.md §4.13 templates. The route's target check has already made the caller a member (or the
// organization's token, staff, the platform key) of `organizationId`, and an owner for writes; what
// is left here is which template that organization may use: its own, or any public one.
import { paged, pageRequest } from '../errors.js';
import type { templateRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import type { Access } from '../authorize.js';
import { listPublicTemplates, listTemplates, type TemplateRecord } from '../../storage/pg/templates.js';
import {
  changeTemplate,
  createTemplate,
  removeTemplate,
  renderForOrganization,
  usableTemplate,
} from '../../core/templates.js';

const templateJson = (t: TemplateRecord) => ({
  id: t.id,
  organization_id: t.organizationId,
  name: t.name,
  subject: t.subject,
  html: t.html,
  text: t.text,
  variables: t.variables.map((v) =>
    v.default === undefined ? { name: v.name } : { name: v.name, default: v.default },
  ),
  is_public: t.isPublic,
  version: t.version,
  created_by: t.createdBy,
  created_at: t.createdAt.toISOString(),
  updated_at: t.updatedAt.toISOString(),
});

function orgOf(rc: RequestCtx): string {
  const access = rc.access as Access | null;
  if (!access) throw new Error('a template route reached without its organization target');
  return access.organizationId;
}

const authorOf = (rc: RequestCtx) => (rc.principal?.kind === 'account_token' ? rc.principal.userId : null);

export const templateHandlers: Handlers<typeof templateRoutes> = {
  async 'modules.templates.templates.create'({ body }, rc) {
    const t = await createTemplate(rc.deps, {
      organizationId: orgOf(rc),
      definition: body,
      createdBy: authorOf(rc),
      now: rc.now,
    });
    rc.audit.targetId = t.id;
    return { template: templateJson(t) };
  },

  async 'modules.templates.templates.list'({ query }, rc) {
    const page = paged(await listTemplates(rc.deps.storage.db, orgOf(rc), pageRequest(query)));
    return { templates: page.rows.map(templateJson), nextCursor: page.nextCursor };
  },

  async 'modules.templates.templates.listPublic'({ query }, rc) {
    const page = paged(await listPublicTemplates(rc.deps.storage.db, pageRequest(query)));
    return { templates: page.rows.map(templateJson), nextCursor: page.nextCursor };
  },

  async 'modules.templates.templates.get'({ query }, rc) {
    return { template: templateJson(await usableTemplate(rc.deps.storage.db, query.id, orgOf(rc))) };
  },

  async 'modules.templates.templates.update'({ body }, rc) {
    const t = await changeTemplate(rc.deps, {
      id: body.id,
      organizationId: orgOf(rc),
      patch: {
        name: body.name,
        subject: body.subject,
        html: body.html,
        text: body.text,
        variables: body.variables,
        isPublic: body.isPublic,
      },
      updatedBy: authorOf(rc),
      now: rc.now,
    });
    rc.audit.targetId = t.id;
    return { template: templateJson(t) };
  },

  async 'modules.templates.templates.delete'({ body }, rc) {
    await removeTemplate(rc.deps, body.id, orgOf(rc));
    rc.audit.targetId = body.id;
    return { ok: true as const };
  },

  async 'modules.templates.templates.render'({ body }, rc) {
    return renderForOrganization(rc.deps, orgOf(rc), body);
  },
};
