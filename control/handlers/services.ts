// GET /health and spec §4.12 whoami.
import type { serviceRoutes } from '../api/services.js';
import type { Handlers } from '../deps.js';
import { fail } from '../errors.js';

export const serviceHandlers: Handlers<typeof serviceRoutes> = {
  async health(_in, { now }) {
    return { ok: true as const, service: 'svc-mail', time: now.toISOString() };
  },

  async 'v1.services.whoami'(_in, { principal }) {
    switch (principal?.kind) {
      case 'account_token':
        // Organizations arrive with issue 3; until then a user belongs to none.
        return { principal: 'account_token' as const, userId: principal.userId, role: principal.userRole, organizations: [] };
      case 'platform_admin':
        return { principal: 'platform_admin' as const };
      default:
        throw fail('unauthorized', 'Request authentication failed.');
    }
  },
};
