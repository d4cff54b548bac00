// Spec §4.3 organizations. (The rest of §4.3 lands with issue 3.)
import { Type } from '@sinclair/typebox';
import { routes } from './types.js';

export const organizationRoutes = routes({
  'console.organizations.roles': {
    method: 'GET', path: '/console/v1/organizations/roles', auth: 'public',
    summary: 'The fixed roles, the permissions each grants, and every permission key (spec §5.5).',
    response: Type.Object({
      roles: Type.Array(Type.Object({ role: Type.String(), permissions: Type.Array(Type.String()) })),
      permissions: Type.Array(Type.String()),
    }),
  },
});
