// Spec §4.8 webhook endpoints. Registering checks the URL (mta/webhooks/target.ts), mints the
// whsec_ secret and seals it: the dispatcher needs it again to sign every request, so it is kept
// encrypted under the master key, bound to its row, and leaves the server once, in this answer.
import { randomUUID } from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import { MAX_WEBHOOKS_PER_PROJECT, type webhookRoutes, type Webhook, type WebhookEvent } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail } from '../errors.js';
import { SECRET_WARNING } from '../tokens.js';
import type { Queryable } from '../../storage/pg/client.js';
import type { Sealer } from '../../storage/secrets.js';
import {
  deleteWebhookEndpoint,
  insertWebhookEndpoint,
  listWebhookEndpoints,
  webhookSecretAad,
  type WebhookEndpoint,
} from '../../storage/pg/webhooks.js';
import { checkWebhookUrl } from '../../mail/webhook-target.js';
import { newWebhookSecret } from '../../mail/webhook-sign.js';

export const webhookJson = (w: WebhookEndpoint): Static<typeof Webhook> => ({
  id: w.id,
  url: w.url,
  events: w.events as WebhookEvent[],
  createdAt: w.createdAt.toISOString(),
});

/**
 * Registers an endpoint of the project (whose access the caller has passed): 400 for a URL that is
 * not http(s) or aims at a private address, 409 past the per-project limit. Returns the row and its
 * secret, which is never shown again.
 */
export async function registerWebhook(
  q: Queryable,
  sealer: Sealer,
  w: {
    projectId: string;
    url: string;
    events: readonly WebhookEvent[] | undefined;
    allowPrivate: boolean;
    now: Date;
    field: string;
  },
): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
  const checked = checkWebhookUrl(w.url.trim(), w.allowPrivate);
  if (!checked.ok) throw fail('invalid_request', checked.message, [{ field: w.field, message: checked.message }]);
  const id = randomUUID();
  const secret = newWebhookSecret();
  const endpoint = await insertWebhookEndpoint(q, {
    id,
    projectId: w.projectId,
    url: checked.url.href,
    events: w.events ?? [],
    secretSealed: sealer.seal(secret, webhookSecretAad(id)),
    now: w.now,
    max: MAX_WEBHOOKS_PER_PROJECT,
  });
  if (!endpoint)
    throw fail('conflict', `A project has at most ${MAX_WEBHOOKS_PER_PROJECT} webhooks; delete one first.`);
  return { endpoint, secret };
}

function projectOf(rc: RequestCtx): string {
  const id = rc.access?.projectId;
  if (!id) throw new Error('a webhook route reached without its project target');
  return id;
}

export const webhookHandlers: Handlers<typeof webhookRoutes> = {
  async 'console.projects.webhooks.create'({ body }, rc) {
    const { db, sealer } = rc.deps.storage;
    const { endpoint, secret } = await registerWebhook(db, sealer, {
      projectId: projectOf(rc),
      url: body.url,
      events: body.events,
      allowPrivate: rc.deps.ctx.config.allowPrivateWebhooks,
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
