// THE route table: every HTTP route of the service, keyed by its SDK method name
// (docs/api.md §1 rule 5: client.<product>.<resource>.<action>() ↔ /<product>/v1/<resource>/<action>).
// Adding a route is one entry here plus its handler under control/handlers/ (docs/architecture.md).
import { authRoutes } from './auth.js';
import { serviceRoutes } from './services.js';
import { organizationRoutes } from './organizations.js';
import { projectRoutes } from './projects.js';
import { dataLayerRoutes } from './data-layer.js';
import { adminRoutes } from './admin.js';
import { auditRoutes } from './audit.js';
import { customDomainRoutes } from './custom-domains.js';
import { domainRoutes } from './domains.js';
import { inboxRoutes } from './inboxes.js';
import { messageRoutes } from './messages.js';
import { sendRoutes } from './send.js';
import { suppressionRoutes } from './suppressions.js';
import { templateRoutes } from './templates.js';
import { webhookRoutes } from './webhooks.js';
import { webmailRoutes } from './webmail.js';

export const routeTable = {
  ...serviceRoutes,
  ...authRoutes,
  ...organizationRoutes,
  ...projectRoutes,
  ...dataLayerRoutes,
  ...adminRoutes,
  ...auditRoutes,
  ...customDomainRoutes,
  ...domainRoutes,
  ...inboxRoutes,
  ...messageRoutes,
  ...sendRoutes,
  ...suppressionRoutes,
  ...templateRoutes,
  ...webhookRoutes,
  ...webmailRoutes,
};

export type RouteTable = typeof routeTable;
export type RouteName = keyof RouteTable;
export * from './types.js';
export * from './permissions.js';
export * from './admin.js';
export * from './audit.js';
export * from './auth.js';
export * from './custom-domains.js';
export * from './data-layer.js';
export * from './domains.js';
export * from './inboxes.js';
export * from './mail-records.js';
export * from './messages.js';
export * from './organizations.js';
export * from './projects.js';
export * from './send.js';
export * from './services.js';
export * from './suppressions.js';
export * from './templates.js';
export * from './webhooks.js';
export * from './webmail.js';
