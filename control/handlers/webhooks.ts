// docs/api.md §4.8 webhook endpoints: HTTP shapes around core/webhooks.ts.
import type { Static } from '@sinclair/typebox';
import { MAX_WEBHOOKS_PER_PROJECT, type webhookRoutes, type Webhook, type WebhookEvent } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail } from '../errors.js';
import { SECRET_WARNING } from '../../core/tokens.js';
import { deleteWebhookEndpoint, listWebhookEndpoints, type WebhookEndpoint } from '../../storage/pg/webhooks.js';
import { registerWebhook } from '../../core/webhooks.js';

export const webhookJson = (w: WebhookEndpoint): Static<typeof Webhook> => ({
  id: w.id,
  url: w.url,
  events: w.events as WebhookEvent[],
  createdAt: w.createdAt.toISOString(),
});

function projectOf(rc: RequestCtx): string {
  const id = rc.access?.projectId;
  if (!id) throw new Error('a webhook route reached without its project target');
  return id;
}

export const webhookHandlers: Handlers<typeof webhookRoutes> = {
  async 'console.projects.webhooks.create'({ body }, rc) {
    const { endpoint, secret } = await registerWebhook(rc.deps, {
      projectId: projectOf(rc),
      url: body.url,
      events: body.events,
      max: MAX_WEBHOOKS_PER_PROJECT,
      now: rc.now,
      field: 'body.url',
    });
    rc.audit.targetId = endpoint.id;
    return { ...webhookJson(endpoint), secret, warning: SECRET_WARNING };
  },

  async 'console.projects.webhooks.list'(_in, rc) {
    return { webhooks: (await listWebhookEndpoints(rc.deps.storage.db, projectOf(rc))).map(webhookJson) };
  },

  async 'console.projects.webhooks.delete'({ params }, rc) {
    if (!(await deleteWebhookEndpoint(rc.deps.storage.db, projectOf(rc), params.webhookId)))
      throw fail('not_found', 'No such webhook in this project.');
    rc.audit.targetId = params.webhookId;
    return { ok: true as const };
  },
};
