// docs/api.md §4.13: the templates module, /modules/templates/v1/templates/*. Reads need membership of
// `organizationId`; writes need its owner (a member of another role gets 403). The organization
// token, staff and the platform key act on the organization fully. Rendering rules:
// control/templates/render.ts.
import { Type } from '@sinclair/typebox';
import { Cursor, Limit, Nullable, Obj, Ok, Timestamp, routes, type CredentialKind, type RouteSpec } from './types.js';

export const TEMPLATE_AUTH: readonly CredentialKind[] = ['account_token', 'organization_token', 'platform_admin'];

/** A placeholder's name, `{{name}}`: an identifier of at most 64 characters. */
export const TEMPLATE_VARIABLE_NAME = '[A-Za-z_][A-Za-z0-9_]{0,63}';

/** docs/api.md §2.2: `variables` is a list of `{ name, default? }`. */
export const TemplateVariable = Obj({
  name: Type.String({ pattern: `^${TEMPLATE_VARIABLE_NAME}$` }),
  default: Type.Optional(Type.String({ maxLength: 10_000 })),
});
const Variables = Type.Array(TemplateVariable, { maxItems: 200 });

/** Values for the placeholders (render `values`, sendEmail `variables`): null is "not given". */
export const TemplateValues = Type.Record(
  Type.String(),
  Type.Union([Type.String(), Type.Number(), Type.Boolean(), Type.Null()]),
);

/** docs/api.md §2.2 template, plus its owner, version and times. */
export const Template = Type.Object({
  id: Type.String(),
  organization_id: Type.String(),
  name: Type.String(),
  subject: Type.String(),
  html: Nullable(Type.String()),
  text: Nullable(Type.String()),
  variables: Type.Array(Type.Object({ name: Type.String(), default: Type.Optional(Type.String()) })),
  is_public: Type.Boolean(),
  /** 1 at create, one more at each update; every version is kept. */
  version: Type.Integer({ minimum: 1 }),
  created_by: Nullable(Type.String()),
  created_at: Timestamp,
  updated_at: Timestamp,
});

const OrgId = Type.String({ maxLength: 64 });
// A template id that is no UUID names no template: 404, as an unknown one.
const TemplateId = Type.String({ minLength: 1, maxLength: 64 });
const Name = Type.String({ minLength: 1, maxLength: 200 });
// As sendEmail's subject (docs/api.md §4.11); CR, LF and NUL are refused by the handler, with the field named.
const Subject = Type.String({ minLength: 1, maxLength: 998 });
// Empty is refused: a part is given or absent (null clears it on update).
const Content = Type.String({ minLength: 1 });

const inBody = { kind: 'organization', in: 'body', field: 'organizationId' } as const satisfies RouteSpec['target'];
const inQuery = { kind: 'organization', in: 'query', field: 'organizationId' } as const satisfies RouteSpec['target'];
const P = '/modules/templates/v1/templates';

export const templateRoutes = routes({
  'modules.templates.templates.create': {
    method: 'POST',
    path: `${P}/create`,
    auth: TEMPLATE_AUTH,
    target: inBody,
    role: 'owner',
    summary:
      'Create a template (version 1): at least one of html or text; isPublic (default false) shows it to every ' +
      'organization.',
    body: Obj({
      organizationId: OrgId,
      name: Name,
      subject: Subject,
      html: Type.Optional(Content),
      text: Type.Optional(Content),
      variables: Type.Optional(Variables),
      isPublic: Type.Optional(Type.Boolean()),
    }),
    response: Type.Object({ template: Template }),
  },
  'modules.templates.templates.list': {
    method: 'GET',
    path: `${P}/list`,
    auth: TEMPLATE_AUTH,
    target: inQuery,
    summary: "The organization's own templates, newest first.",
    query: Obj({ organizationId: OrgId, limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) }),
    response: Type.Object({ templates: Type.Array(Template), nextCursor: Nullable(Type.String()) }),
  },
  'modules.templates.templates.listPublic': {
    method: 'GET',
    path: `${P}/list-public`,
    auth: TEMPLATE_AUTH,
    target: inQuery,
    summary: 'Every public template of every organization, newest first (organizationId is for authorization only).',
    query: Obj({ organizationId: OrgId, limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) }),
    response: Type.Object({ templates: Type.Array(Template), nextCursor: Nullable(Type.String()) }),
  },
  'modules.templates.templates.get': {
    method: 'GET',
    path: `${P}/get`,
    auth: TEMPLATE_AUTH,
    target: inQuery,
    summary:
      "A template of the organization, or a public one of any organization; 404 for another organization's private " +
      'template.',
    query: Obj({ organizationId: OrgId, id: TemplateId }),
    response: Type.Object({ template: Template }),
  },
  'modules.templates.templates.update': {
    method: 'POST',
    path: `${P}/update`,
    auth: TEMPLATE_AUTH,
    target: inBody,
    role: 'owner',
    summary:
      'Change fields of an own template (html or text null clears that part; one must remain), as a new version; ' +
      "the previous versions are kept. 403 for another organization's public template, 404 for its private one.",
    body: Obj({
      organizationId: OrgId,
      id: TemplateId,
      name: Type.Optional(Name),
      subject: Type.Optional(Subject),
      html: Type.Optional(Nullable(Content)),
      text: Type.Optional(Nullable(Content)),
      variables: Type.Optional(Variables),
      isPublic: Type.Optional(Type.Boolean()),
    }),
    response: Type.Object({ template: Template }),
  },
  'modules.templates.templates.delete': {
    method: 'POST',
    path: `${P}/delete`,
    auth: TEMPLATE_AUTH,
    target: inBody,
    role: 'owner',
    summary:
      'Delete an own template with its versions (messages keep the id and version they used). 403 for another ' +
      "organization's " +
      'public template, 404 for its private one.',
    body: Obj({ organizationId: OrgId, id: TemplateId }),
    response: Ok,
  },
  'modules.templates.templates.render': {
    method: 'POST',
    path: `${P}/render`,
    auth: TEMPLATE_AUTH,
    target: inBody,
    // A preview changes nothing.
    audit: false,
    summary:
      'Render a template by id (own or public) or inline ({ subject?, html?, text?, variables }) with values over ' +
      'the defaults: ' +
      'HTML-escaped in html, verbatim in subject and text. 422 unprocessable lists missing variables or says the ' +
      'output passed 1 MB.',
    body: Obj({
      organizationId: OrgId,
      id: Type.Optional(TemplateId),
      subject: Type.Optional(Subject),
      html: Type.Optional(Content),
      text: Type.Optional(Content),
      variables: Type.Optional(Variables),
      values: Type.Optional(TemplateValues),
    }),
    response: Type.Object({
      subject: Nullable(Type.String()),
      html: Nullable(Type.String()),
      text: Nullable(Type.String()),
    }),
  },
});
