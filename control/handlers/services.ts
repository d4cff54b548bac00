// GET /health and docs/api.md §4.12 whoami.
import type { serviceRoutes } from '@svc-mail/sdk';
import type { Handlers } from '../deps.js';
import { fail } from '../errors.js';
import { getOrganization, listOrganizationsOfUser } from '../../storage/pg/organizations.js';

export const serviceHandlers: Handlers<typeof serviceRoutes> = {
  async health(_in, { now }) {
    return { ok: true as const, service: 'svc-mail', time: now.toISOString() };
  },

  async 'v1.services.whoami'(_in, { principal, deps }) {
    const { db } = deps.storage;
    switch (principal?.kind) {
      case 'account_token': {
        const orgs = await listOrganizationsOfUser(db, principal.userId);
        return {
          principal: 'account_token' as const,
          userId: principal.userId,
          role: principal.userRole,
          organizations: orgs.map((o) => ({ id: o.id, name: o.name, plan: o.plan })),
        };
      }
      case 'organization_token': {
        const org = await getOrganization(db, principal.organizationId);
        if (!org) throw fail('unauthorized', 'Request authentication failed.');
        return {
          principal: 'organization_token' as const,
          organizationId: org.id,
          organization: { id: org.id, name: org.name, plan: org.plan },
        };
      }
      case 'project_api_key':
        return {
          principal: 'project_api_key' as const,
          projectId: principal.projectId,
          organizationId: principal.organizationId,
          scopes: principal.scopes,
        };
      case 'platform_admin':
        return { principal: 'platform_admin' as const };
      default:
        throw fail('unauthorized', 'Request authentication failed.');
    }
  },
};
