// Handlers of the admin route group.
import type { adminRoutes } from '../api/admin.js';
import type { Handlers } from '../deps.js';

export const adminHandlers: Handlers<typeof adminRoutes> = {};
