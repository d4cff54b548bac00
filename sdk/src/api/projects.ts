// docs/api.md §4.6 projects and §4.7 project API keys.
import { Type } from '@sinclair/typebox';
import { Nullable, Obj, Ok, SCOPES, Timestamp, routes, type CredentialKind, type RouteSpec } from './types.js';
import { Message, Suppression, Webhook } from './mail-records.js';

/**
 * Project routes: a member's account token, the org token, staff, the platform key, or a key of the project with
 * project:admin.
 */
export const PROJECT_AUTH: readonly CredentialKind[] = [
  'account_token',
  'organization_token',
  'project_api_key',
  'platform_admin',
];
const byId = { kind: 'project', in: 'params', field: 'id' } as const satisfies RouteSpec['target'];
const Id = Type.String({ maxLength: 64 });

export const Project = Type.Object({
  id: Type.String(),
  organization_id: Type.String(),
  name: Type.String(),
  status: Type.Literal('active'),
  plan: Type.String(),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const ScopeSchema = Type.Union(SCOPES.map((s) => Type.Literal(s)));

export const ApiKey = Type.Object({
  id: Type.String(),
  keyId: Type.String(),
  label: Nullable(Type.String()),
  scopes: Type.Array(ScopeSchema),
  managed: Type.Union([Type.Literal('platform'), Type.Literal('local')]),
  allowedCidrs: Type.Array(Type.String()),
  /** docs/api.md §2.2: list rows carry the snake_case name for platform keys. */
  allowed_cidrs: Type.Array(Type.String()),
  rotatedFrom: Nullable(Type.String()),
  createdAt: Timestamp,
  expiresAt: Nullable(Timestamp),
});
const MintedKey = Type.Intersect([ApiKey, Type.Object({ secret: Type.String(), warning: Type.String() })]);

const Name = Type.String({ minLength: 1, maxLength: 200 });
/** How many suppressions and messages the project detail shows, newest first. */
export const PROJECT_DETAIL_RECENT = 50;

export const projectRoutes = routes({
  'console.projects.create': {
    method: 'POST',
    path: '/console/v1/projects',
    auth: ['account_token', 'organization_token', 'platform_admin'],
    target: { kind: 'organization', in: 'body', field: 'organizationId' },
    permission: 'projects:manage',
    summary: 'Create a project; its first key (scope project:admin) is returned with its secret, once.',
    body: Obj({ name: Name, organizationId: Type.String({ maxLength: 64 }) }),
    response: Type.Object({ project: Project, apiKey: MintedKey }),
  },
  'console.projects.list': {
    method: 'GET',
    path: '/console/v1/projects',
    auth: ['account_token', 'organization_token', 'platform_admin'],
    summary: "Projects across the caller's organizations, optionally of one.",
    query: Obj({ organizationId: Type.Optional(Type.String({ maxLength: 64 })) }),
    response: Type.Object({ projects: Type.Array(Project) }),
  },
  'console.projects.me': {
    method: 'GET',
    path: '/console/v1/projects/me',
    auth: ['project_api_key'],
    summary: "The calling key's own project.",
    response: Type.Object({ project: Project }),
  },
  'console.projects.get': {
    method: 'GET',
    path: '/console/v1/projects/{id}',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    summary:
      'The project with its keys, sender domains, webhooks, ' +
      `and its ${PROJECT_DETAIL_RECENT} newest suppressions and messages ` +
      '(the whole lists: /v1/suppressions/list, /console/v1/projects/{id}/messages).',
    params: Type.Object({ id: Id }),
    response: Type.Object({
      project: Project,
      apiKeys: Type.Array(ApiKey),
      domains: Type.Array(Type.Unknown()),
      webhooks: Type.Array(Webhook),
      suppressions: Type.Array(Suppression),
      messages: Type.Array(Message),
    }),
  },
  'console.projects.update': {
    method: 'PATCH',
    path: '/console/v1/projects/{id}',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'projects:manage',
    summary: 'Rename the project.',
    params: Type.Object({ id: Id }),
    body: Obj({ name: Name }),
    response: Type.Object({ project: Project }),
  },
  'console.projects.delete': {
    method: 'DELETE',
    path: '/console/v1/projects/{id}',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'projects:manage',
    summary: 'Soft-delete the project: it leaves every list and its keys stop working.',
    params: Type.Object({ id: Id }),
    response: Ok,
  },
  'console.projects.apiKeys.create': {
    method: 'POST',
    path: '/console/v1/projects/{id}/api-keys',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'apikeys:manage',
    summary: 'Mint a platform-managed key (tk_); the secret is returned once. allowedCidrs restricts source addresses.',
    params: Type.Object({ id: Id }),
    body: Obj({
      label: Type.Optional(Type.String({ maxLength: 200 })),
      scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
      allowedCidrs: Type.Optional(Type.Array(Type.String({ format: 'cidr', maxLength: 64 }), { maxItems: 100 })),
    }),
    response: MintedKey,
  },
  'console.projects.apiKeys.list': {
    method: 'GET',
    path: '/console/v1/projects/{id}/api-keys',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    summary: 'Live keys of the project, without secrets.',
    params: Type.Object({ id: Id }),
    response: Type.Object({ apiKeys: Type.Array(ApiKey) }),
  },
  'console.projects.apiKeys.update': {
    method: 'PATCH',
    path: '/console/v1/projects/{id}/api-keys/{keyId}',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'apikeys:manage',
    summary: 'Rename a local key (only the label is mutable); 400 for platform-managed (tk_) keys.',
    params: Type.Object({ id: Id, keyId: Type.String({ maxLength: 200 }) }),
    body: Obj({ label: Nullable(Type.String({ maxLength: 200 })) }),
    response: Type.Object({ key: ApiKey }),
  },
  'console.projects.apiKeys.rotate': {
    method: 'POST',
    path: '/console/v1/projects/{id}/api-keys/{keyId}/rotate',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'apikeys:manage',
    summary: 'Rotate a platform-managed key: a successor is minted, the old key works 24 h more. 400 for local keys.',
    params: Type.Object({ id: Id, keyId: Type.String({ maxLength: 200 }) }),
    response: MintedKey,
  },
  'console.projects.apiKeys.delete': {
    method: 'DELETE',
    path: '/console/v1/projects/{id}/api-keys/{keyId}',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'apikeys:manage',
    summary: "Revoke a key by its tk_ id or a local key's database id.",
    params: Type.Object({ id: Id, keyId: Type.String({ maxLength: 200 }) }),
    response: Ok,
  },
});
