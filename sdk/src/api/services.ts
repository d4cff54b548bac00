// docs/api.md §1 rule 4 (health) and §4.12 (identity).
import { Type } from '@sinclair/typebox';
import { Timestamp, routes } from './types.js';

const OrgSummary = Type.Object({ id: Type.String(), name: Type.String(), plan: Type.String() });

export const Whoami = Type.Union([
  Type.Object({
    principal: Type.Literal('account_token'),
    userId: Type.String(),
    role: Type.String(),
    organizations: Type.Array(OrgSummary),
  }),
  Type.Object({
    principal: Type.Literal('organization_token'),
    organizationId: Type.String(),
    organization: OrgSummary,
  }),
  Type.Object({
    principal: Type.Literal('project_api_key'),
    projectId: Type.String(),
    organizationId: Type.String(),
    scopes: Type.Array(Type.String()),
  }),
  Type.Object({ principal: Type.Literal('platform_admin') }),
]);

export const serviceRoutes = routes({
  health: {
    method: 'GET',
    path: '/health',
    auth: 'public',
    summary: 'Readiness: 200 once the service answers.',
    response: Type.Object({ ok: Type.Literal(true), service: Type.String(), time: Timestamp }),
  },
  'v1.services.whoami': {
    method: 'GET',
    path: '/v1/services/whoami',
    auth: ['account_token', 'organization_token', 'project_api_key', 'platform_admin'],
    summary: 'Who the calling credential is, discriminated by `principal`.',
    response: Whoami,
  },
});
