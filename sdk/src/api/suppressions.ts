// docs/api.md §4.9: a project's suppression list in the console. The same rows as the data layer's
// `suppressions` table (/v1/suppressions/*): addresses are stored, filtered and deleted normalized
// (the local part as given, the domain in lower case). A project key needs suppressions:read or
// suppressions:write (docs/api.md §5.3); a member needs projects:manage to write (docs/api.md §5.5).
import { Type } from '@sinclair/typebox';
import { Cursor, Limit, Nullable, Obj, Ok, routes, type RouteSpec } from './types.js';
import { PROJECT_AUTH } from './projects.js';
import { Suppression, SuppressionReasonSchema } from './mail-records.js';

const byId = { kind: 'project', in: 'params', field: 'id' } as const satisfies RouteSpec['target'];
const Id = Type.String({ maxLength: 64 });
/** An address as a client writes it; the handler checks it is a mailbox and normalizes it. */
const Address = Type.String({ minLength: 3, maxLength: 320 });

export const suppressionRoutes = routes({
  'console.projects.suppressions.create': {
    method: 'POST',
    path: '/console/v1/projects/{id}/suppressions',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'suppressions:write',
    permission: 'projects:manage',
    summary:
      'Suppress an address: mail to it is accepted as suppressed and never sent. reason defaults to manual; ' +
      '409 conflict when the project already suppresses the address.',
    params: Type.Object({ id: Id }),
    body: Obj({
      address: Address,
      reason: Type.Optional(SuppressionReasonSchema),
      detail: Type.Optional(Nullable(Type.String({ maxLength: 1000 }))),
    }),
    response: Type.Object({ suppression: Suppression }),
  },
  'console.projects.suppressions.list': {
    method: 'GET',
    path: '/console/v1/projects/{id}/suppressions',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'suppressions:read',
    summary: "The project's suppressions, newest first; with address, only that address's (its domain in any case).",
    params: Type.Object({ id: Id }),
    query: Obj({ address: Type.Optional(Address), limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) }),
    response: Type.Object({ suppressions: Type.Array(Suppression), nextCursor: Nullable(Type.String()) }),
  },
  'console.projects.suppressions.delete': {
    method: 'DELETE',
    path: '/console/v1/projects/{id}/suppressions/{address}',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'suppressions:write',
    permission: 'projects:manage',
    summary: 'Lift the suppression of an address (URL-encoded; its domain in any case), whatever its reason.',
    params: Type.Object({ id: Id, address: Address }),
    response: Ok,
  },
});
