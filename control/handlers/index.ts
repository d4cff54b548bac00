// Every route's handler, keyed like the route table; control/app.ts refuses to start if they differ.
import type { RouteTable } from '@svc-mail/sdk';
import type { Handlers } from '../deps.js';
import { authHandlers } from './auth.js';
import { serviceHandlers } from './services.js';
import { organizationHandlers } from './organizations.js';
import { projectHandlers } from './projects.js';
import { dataLayerHandlers } from './data-layer.js';
import { adminHandlers } from './admin.js';
import { auditHandlers } from './audit.js';
import { customDomainHandlers } from './custom-domains.js';
import { domainHandlers } from './domains.js';
import { inboxHandlers } from './inboxes.js';
import { messageHandlers } from './messages.js';
import { sendHandlers } from './send.js';
import { suppressionHandlers } from './suppressions.js';
import { templateHandlers } from './templates.js';
import { webhookHandlers } from './webhooks.js';
import { webmailHandlers } from '../webmail/handlers.js';

export const handlers: Handlers<RouteTable> = {
  ...serviceHandlers,
  ...authHandlers,
  ...organizationHandlers,
  ...projectHandlers,
  ...dataLayerHandlers,
  ...adminHandlers,
  ...auditHandlers,
  ...customDomainHandlers,
  ...domainHandlers,
  ...inboxHandlers,
  ...messageHandlers,
  ...sendHandlers,
  ...suppressionHandlers,
  ...templateHandlers,
  ...webhookHandlers,
  ...webmailHandlers,
};
