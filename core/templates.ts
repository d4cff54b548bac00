// The templates module (docs/api.md §4.13) as operations of an organization: which template it may use
// (its own, or any public one), its owner-only writes, and rendering. The caller has already made the
// principal a member of `organizationId` (an owner for writes).
import { randomUUID } from 'node:crypto';
import { ApiError, fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { renderTemplate, type RenderOutcome, type TemplateParts } from './template-render.js';
import { isPgError, type Queryable } from '../storage/pg/client.js';
import {
  deleteTemplate,
  getTemplate,
  insertTemplate,
  PG_CHECK_VIOLATION,
  updateTemplate,
  type TemplatePatch,
  type TemplateRecord,
  type TemplateVariable,
} from '../storage/pg/templates.js';

const noSuchTemplate = () => fail('not_found', 'No such template.');

/**
 * The template as `organizationId` may use it (get, render, sendEmail): its own, or a public one of
 * any organization. Another organization's private template is the same 404 as an unknown id.
 */
export async function usableTemplate(q: Queryable, id: string, organizationId: string): Promise<TemplateRecord> {
  return usable(await getTemplate(q, id), organizationId);
}

/** usableTemplate's rule over a template already read (null: none by that id). */
export function usable(t: TemplateRecord | null, organizationId: string): TemplateRecord {
  if (!t || (t.organizationId !== organizationId && !t.isPublic)) throw noSuchTemplate();
  return t;
}

/**
 * Only the owning organization changes a template: 403 for a public one of another (it is visible), 404 for a
 * private one.
 */
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
      problems.push({ field: `body.variables[${i}].name`, message: `names ${v.name} a second time` });
    seen.add(v.name);
  }
  if (problems.length)
    throw fail('invalid_request', problems.map((p) => `${p.field} ${p.message}`).join('; ') + '.', problems);
}

const bothPartsGone = () =>
  fail('invalid_request', 'A template needs html or text.', [
    { field: 'body.html', message: 'html or text is required' },
  ]);

export interface TemplateDefinition {
  name: string;
  subject: string;
  html?: string;
  text?: string;
  variables?: TemplateVariable[];
  isPublic?: boolean;
}

export async function createTemplate(
  deps: CoreDeps,
  c: { organizationId: string; definition: TemplateDefinition; createdBy: string | null; now: Date },
): Promise<TemplateRecord> {
  const d = c.definition;
  checkDefinition(d);
  if (d.html === undefined && d.text === undefined) throw bothPartsGone();
  return insertTemplate(deps.storage.db, {
    id: randomUUID(),
    organizationId: c.organizationId,
    name: d.name,
    subject: d.subject,
    html: d.html ?? null,
    text: d.text ?? null,
    variables: d.variables ?? [],
    isPublic: d.isPublic ?? false,
    createdBy: c.createdBy,
    now: c.now,
  });
}

/** The changed template as version n+1; with nothing to change, the template as it is (no new version). */
export async function changeTemplate(
  deps: CoreDeps,
  u: { id: string; organizationId: string; patch: TemplatePatch; updatedBy: string | null; now: Date },
): Promise<TemplateRecord> {
  checkDefinition(u.patch);
  const { db } = deps.storage;
  const current = await ownTemplate(db, u.id, u.organizationId);
  if (Object.values(u.patch).every((v) => v === undefined)) return current;
  let t: TemplateRecord | null;
  try {
    t = await updateTemplate(db, u);
  } catch (err) {
    if (isPgError(err, PG_CHECK_VIOLATION)) throw bothPartsGone();
    throw err;
  }
  // Deleted since ownTemplate looked.
  if (!t) throw noSuchTemplate();
  return t;
}

export async function removeTemplate(deps: CoreDeps, id: string, organizationId: string): Promise<void> {
  const { db } = deps.storage;
  await ownTemplate(db, id, organizationId);
  if (!(await deleteTemplate(db, id, organizationId))) throw noSuchTemplate();
}

/** Renders a template of the organization by id, or one given inline (the render route of docs/api.md §4.13). */
export async function renderForOrganization(
  deps: CoreDeps,
  organizationId: string,
  r: {
    id?: string;
    subject?: string;
    html?: string;
    text?: string;
    variables?: TemplateVariable[];
    values?: Readonly<Record<string, unknown>>;
  },
): Promise<TemplateParts> {
  let parts: TemplateParts;
  let defaults: TemplateVariable[];
  if (r.id !== undefined) {
    const inline = (['subject', 'html', 'text', 'variables'] as const).filter((f) => r[f] !== undefined);
    if (inline.length) {
      throw fail(
        'invalid_request',
        'Render a template by id or inline, not both.',
        inline.map((f) => ({ field: `body.${f}`, message: 'is not allowed with id' })),
      );
    }
    const t = await usableTemplate(deps.storage.db, r.id, organizationId);
    parts = { subject: t.subject, html: t.html, text: t.text };
    defaults = t.variables;
  } else {
    checkDefinition(r);
    if (r.html === undefined && r.text === undefined) {
      throw fail('invalid_request', 'Give id, or html or text to render inline.', [
        { field: 'body.id', message: 'id, html or text is required' },
      ]);
    }
    parts = { subject: r.subject ?? null, html: r.html ?? null, text: r.text ?? null };
    defaults = r.variables ?? [];
  }
  return renderedOrFail(renderTemplate(parts, defaults, r.values), 'body.values');
}
