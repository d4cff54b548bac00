// Spec §4.13 templates. The route's target check has already made the caller a member (or the
// organization's token, staff, the platform key) of `organizationId`, and an owner for writes; what
// is left here is which template that organization may use: its own, or any public one.
import { randomUUID } from 'node:crypto';
import { type templateRoutes, clampLimit } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { ApiError, fail } from '../errors.js';
import type { Access } from '../authorize.js';
import { renderTemplate, type RenderOutcome, type TemplateParts } from '../templates/render.js';
import type { Queryable } from '../../storage/pg/client.js';
import { isPgError } from '../../storage/pg/client.js';
import {
  deleteTemplate,
  getTemplate,
  insertTemplate,
  listPublicTemplates,
  listTemplates,
  PG_CHECK_VIOLATION,
  updateTemplate,
  type TemplateRecord,
  type TemplateVariable,
} from '../../storage/pg/templates.js';

export const templateJson = (t: TemplateRecord) => ({
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

const noSuchTemplate = () => fail('not_found', 'No such template.');

/**
 * The template as `organizationId` may use it (get, render, sendEmail): its own, or a public one of
 * any organization. Another organization's private template is the same 404 as an unknown id.
 */
export async function usableTemplate(q: Queryable, id: string, organizationId: string): Promise<TemplateRecord> {
  const t = await getTemplate(q, id);
  if (!t || (t.organizationId !== organizationId && !t.isPublic)) throw noSuchTemplate();
  return t;
}

/** Only the owning organization changes a template: 403 for a public one of another (it is visible), 404 for a private one. */
async function ownTemplate(q: Queryable, id: string, organizationId: string): Promise<TemplateRecord> {
  const t = await usableTemplate(q, id, organizationId);
  if (t.organizationId !== organizationId)
    throw fail('forbidden', 'Only the organization that owns this public template may change it.');
  return t;
}

/**
 * A rendering, or the error it is: 422 `unprocessable` for missing variables (`details.missing`
 * names them) and for output past the bound; 400 `invalid_request` for a value that would break the
 * subject, as sendEmail answers a subject with a line break. `valuesField` names the values in details.
 */
export function renderedOrFail(outcome: RenderOutcome, valuesField: string): TemplateParts {
  if (outcome.ok) return outcome.parts;
  switch (outcome.reason) {
    case 'missing':
      throw new ApiError('unprocessable', `No value and no default for ${outcome.names.join(', ')}.`, {
        missing: outcome.names,
      });
    case 'subject_break':
      throw fail(
        'invalid_request',
        'A value would put a line break or NUL into the subject.',
        outcome.names.map((n) => ({
          field: `${valuesField}.${n}`,
          message: 'is used in the subject and must not contain CR, LF or NUL',
        })),
      );
    case 'too_large':
      throw new ApiError('unprocessable', `The rendered template would pass ${outcome.limitBytes} bytes.`, {
        limitBytes: outcome.limitBytes,
      });
  }
}

// RFC 5322 §2.2: the subject becomes a header field, which never holds a bare CR or LF; NUL never.
const HEADER_BREAK = /[\r\n\0]/;

/** 400 for a subject with a line break, or a variable list naming a variable twice. */
function checkDefinition(b: { subject?: string; variables?: TemplateVariable[] }): void {
  const problems: { field: string; message: string }[] = [];
  if (b.subject !== undefined && HEADER_BREAK.test(b.subject))
    problems.push({ field: 'body.subject', message: 'must not contain CR, LF or NUL' });
  const seen = new Set<string>();
  for (const [i, v] of (b.variables ?? []).entries()) {
    if (seen.has(v.name))
      problems.push({ field: `body.variables.${i}.name`, message: `names ${v.name} a second time` });
    seen.add(v.name);
  }
  if (problems.length)
    throw fail('invalid_request', problems.map((p) => `${p.field} ${p.message}`).join('; ') + '.', problems);
}

const bothPartsGone = () =>
  fail('invalid_request', 'A template needs html or text.', [
    { field: 'body.html', message: 'html or text is required' },
  ]);

function orgOf(rc: RequestCtx): string {
  const access = rc.access as Access | null;
  if (!access) throw new Error('a template route reached without its organization target');
  return access.organizationId;
}

const authorOf = (rc: RequestCtx) => (rc.principal?.kind === 'account_token' ? rc.principal.userId : null);

export const templateHandlers: Handlers<typeof templateRoutes> = {
  async 'modules.templates.templates.create'({ body }, rc) {
    checkDefinition(body);
    if (body.html === undefined && body.text === undefined) throw bothPartsGone();
    const t = await insertTemplate(rc.deps.storage.db, {
      id: randomUUID(),
      organizationId: orgOf(rc),
      name: body.name,
      subject: body.subject,
      html: body.html ?? null,
      text: body.text ?? null,
      variables: body.variables ?? [],
      isPublic: body.isPublic ?? false,
      createdBy: authorOf(rc),
      now: rc.now,
    });
    rc.audit.targetId = t.id;
    return { template: templateJson(t) };
  },

  async 'modules.templates.templates.list'({ query }, rc) {
    return {
      templates: (await listTemplates(rc.deps.storage.db, orgOf(rc), clampLimit(query.limit))).map(templateJson),
    };
  },

  async 'modules.templates.templates.listPublic'({ query }, rc) {
    return { templates: (await listPublicTemplates(rc.deps.storage.db, clampLimit(query.limit))).map(templateJson) };
  },

  async 'modules.templates.templates.get'({ query }, rc) {
    return { template: templateJson(await usableTemplate(rc.deps.storage.db, query.id, orgOf(rc))) };
  },

  async 'modules.templates.templates.update'({ body }, rc) {
    checkDefinition(body);
    const { db } = rc.deps.storage;
    const organizationId = orgOf(rc);
    const current = await ownTemplate(db, body.id, organizationId);
    const patch = {
      name: body.name,
      subject: body.subject,
      html: body.html,
      text: body.text,
      variables: body.variables,
      isPublic: body.isPublic,
    };
    rc.audit.targetId = current.id;
    // Nothing to change: no new version.
    if (Object.values(patch).every((v) => v === undefined)) return { template: templateJson(current) };
    let t: TemplateRecord | null;
    try {
      t = await updateTemplate(db, { id: body.id, organizationId, patch, updatedBy: authorOf(rc), now: rc.now });
    } catch (err) {
      if (isPgError(err, PG_CHECK_VIOLATION)) throw bothPartsGone();
      throw err;
    }
    // Deleted since ownTemplate looked.
    if (!t) throw noSuchTemplate();
    return { template: templateJson(t) };
  },

  async 'modules.templates.templates.delete'({ body }, rc) {
    const { db } = rc.deps.storage;
    const organizationId = orgOf(rc);
    await ownTemplate(db, body.id, organizationId);
    if (!(await deleteTemplate(db, body.id, organizationId))) throw noSuchTemplate();
    rc.audit.targetId = body.id;
    return { ok: true as const };
  },

  async 'modules.templates.templates.render'({ body }, rc) {
    let parts: TemplateParts;
    let defaults: TemplateVariable[];
    if (body.id !== undefined) {
      const inline = (['subject', 'html', 'text', 'variables'] as const).filter((f) => body[f] !== undefined);
      if (inline.length) {
        throw fail(
          'invalid_request',
          'Render a template by id or inline, not both.',
          inline.map((f) => ({ field: `body.${f}`, message: 'is not allowed with id' })),
        );
      }
      const t = await usableTemplate(rc.deps.storage.db, body.id, orgOf(rc));
      parts = { subject: t.subject, html: t.html, text: t.text };
      defaults = t.variables;
    } else {
      checkDefinition(body);
      if (body.html === undefined && body.text === undefined) {
        throw fail('invalid_request', 'Give id, or html or text to render inline.', [
          { field: 'body.id', message: 'id, html or text is required' },
        ]);
      }
      parts = { subject: body.subject ?? null, html: body.html ?? null, text: body.text ?? null };
      defaults = body.variables ?? [];
    }
    return renderedOrFail(renderTemplate(parts, defaults, body.values), 'body.values');
  },
};
