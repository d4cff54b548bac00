// Reads of the audit log: the platform-wide view (docs/api.md §4.14) and one project's view (docs/api.md §4.10).
// Rows are written by the app for every successful non-GET request (control/app.ts).
import { Type } from '@sinclair/typebox';
import { Cursor, Nullable, Obj, Timestamp, routes } from './types.js';
import { ADMIN_AUTH } from './admin.js';
import { Limit } from './types.js';
import { PROJECT_AUTH } from './projects.js';

export const AuditEntry = Type.Object({
  id: Type.String(),
  createdAt: Timestamp,
  /** 'user', 'staff', 'organization_token', 'project_api_key', 'platform_admin' or 'anonymous'. */
  actorKind: Type.String(),
  /** The user id for account tokens, the key id for organization tokens and project keys. */
  actorId: Nullable(Type.String()),
  /** The route name, e.g. console.projects.update. */
  action: Type.String(),
  method: Type.String(),
  path: Type.String(),
  status: Type.Integer(),
  organizationId: Nullable(Type.String()),
  projectId: Nullable(Type.String()),
  targetId: Nullable(Type.String()),
  requestId: Type.String(),
  ip: Nullable(Type.String()),
});

const Action = Type.String({ minLength: 1, maxLength: 200 });
const Entries = Type.Object({ entries: Type.Array(AuditEntry), nextCursor: Nullable(Type.String()) });

export const auditRoutes = routes({
  'admin.audit.list': {
    method: 'GET',
    path: '/admin/v1/audit',
    auth: ADMIN_AUTH,
    summary: 'The audit log, newest first; optionally of one project and of one action (route name).',
    query: Obj({
      limit: Type.Optional(Limit),
      cursor: Type.Optional(Cursor),
      projectId: Type.Optional(Type.String({ format: 'uuid' })),
      action: Type.Optional(Action),
    }),
    response: Entries,
  },
  'console.projects.audit': {
    method: 'GET',
    path: '/console/v1/projects/{id}/audit',
    auth: PROJECT_AUTH,
    target: { kind: 'project', in: 'params', field: 'id' },
    scope: 'project:admin',
    summary: "The project's audit log, newest first; optionally of one action (route name).",
    params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
    query: Obj({ limit: Type.Optional(Limit), cursor: Type.Optional(Cursor), action: Type.Optional(Action) }),
    response: Entries,
  },
});
