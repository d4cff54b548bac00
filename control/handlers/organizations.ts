// Spec §4.3 organizations.
import type { organizationRoutes } from '../api/organizations.js';
import { PERMISSIONS, ROLES, ROLE_PERMISSIONS } from '../api/permissions.js';
import type { Handlers } from '../deps.js';

export const organizationHandlers: Handlers<typeof organizationRoutes> = {
  async 'console.organizations.roles'() {
    return { roles: ROLES.map((role) => ({ role, permissions: [...ROLE_PERMISSIONS[role]] })), permissions: [...PERMISSIONS] };
  },
};
