// Webhook endpoints of a project (docs/api.md §4.8, and as rows of the data layer, §4.1). Registering checks
// the URL (mail/webhook-target.ts), mints the whsec_ secret and seals it: the dispatcher needs it again to
// sign every request, so it is kept encrypted under the master key, bound to its row, and leaves the server
// once, in the answer to the write that created it. The caller has already checked access to `projectId`.
import { randomUUID } from 'node:crypto';
import { fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import {
  insertWebhookEndpoint,
  updateWebhookEndpoint,
  upsertWebhookEndpoint,
  webhookSecretAad,
  type WebhookEndpoint,
  type WebhookEventType,
} from '../storage/pg/webhooks.js';
import { checkWebhookUrl } from '../mail/webhook-target.js';
import { newWebhookSecret } from '../mail/webhook-sign.js';

/** The URL as stored: http(s) and, unless the operator allows private ones, a public address; else 400. */
function checkedUrl(deps: CoreDeps, url: string, field: string): string {
  const checked = checkWebhookUrl(url.trim(), deps.ctx.config.allowPrivateWebhooks);
  if (!checked.ok) throw fail('invalid_request', checked.message, [{ field, message: checked.message }]);
  return checked.url.href;
}

const tooMany = (max: number) => fail('conflict', `A project has at most ${max} webhooks; delete one first.`);

/** A new endpoint's row, with its secret sealed to its id. */
function newEndpoint(deps: CoreDeps, w: EndpointInput, url: string) {
  const id = randomUUID();
  const secret = newWebhookSecret();
  const row = {
    id,
    projectId: w.projectId,
    url,
    events: w.events ?? [],
    secretSealed: deps.storage.sealer.seal(secret, webhookSecretAad(id)),
    now: w.now,
    max: w.max,
  };
  return { row, secret };
}

export interface EndpointInput {
  projectId: string;
  url: string;
  /** The kinds subscribed to; empty or absent: every kind (docs/decisions.md #5). */
  events: readonly WebhookEventType[] | undefined;
  /** The most endpoints a project may have. */
  max: number;
  now: Date;
  /** The request field the url came in, for the 400's details. */
  field: string;
}

/**
 * Registers an endpoint: 400 for a URL that is not http(s) or aims at a private address, 409 past the
 * per-project limit. Returns the row and its secret, which is never shown again.
 */
export async function registerWebhook(
  deps: CoreDeps,
  w: EndpointInput,
): Promise<{ endpoint: WebhookEndpoint; secret: string }> {
  const { row, secret } = newEndpoint(deps, w, checkedUrl(deps, w.url, w.field));
  const endpoint = await insertWebhookEndpoint(deps.storage.db, row);
  if (!endpoint) throw tooMany(w.max);
  return { endpoint, secret };
}

/** Changes the url and/or events of an endpoint of the project; its secret stays. 404 when there is none. */
export async function changeWebhook(
  deps: CoreDeps,
  projectId: string,
  id: string,
  patch: { url?: string; events?: readonly WebhookEventType[] },
  field: string,
): Promise<WebhookEndpoint> {
  const url = patch.url === undefined ? undefined : checkedUrl(deps, patch.url, field);
  const endpoint = await updateWebhookEndpoint(deps.storage.db, projectId, id, { url, events: patch.events });
  if (!endpoint) throw fail('not_found', 'No such row in webhook_endpoints.');
  return endpoint;
}

/**
 * The project's endpoint at this url with these events: inserted (with its secret, this once) or, when the
 * project has one at the same url, its events updated (the secret stays where it was, unseen).
 */
export async function upsertWebhook(
  deps: CoreDeps,
  w: EndpointInput,
): Promise<{ endpoint: WebhookEndpoint; secret: string | null }> {
  const { row, secret } = newEndpoint(deps, w, checkedUrl(deps, w.url, w.field));
  const out = await deps.storage.db.tx((q) => upsertWebhookEndpoint(q, row));
  switch (out.kind) {
    case 'limit':
      throw tooMany(w.max);
    case 'inserted':
      return { endpoint: out.endpoint, secret };
    case 'updated':
      return { endpoint: out.endpoint, secret: null };
  }
}
