// docs/api.md §4.8 webhooks (§6 rules 2-3, docs/decisions.md #5): a project's endpoints. Managing them is
// projects:manage for members (docs/api.md §5.5) and project:admin for keys (docs/api.md §5.3); reading needs
// membership, as every read.
import { Type } from '@sinclair/typebox';
import { Obj, Ok, routes, type RouteSpec } from './types.js';
import { PROJECT_AUTH } from './projects.js';
import { Webhook, WebhookEventSchema, WEBHOOK_EVENTS } from './mail-records.js';

const byId = { kind: 'project', in: 'params', field: 'id' } as const satisfies RouteSpec['target'];
const Id = Type.String({ maxLength: 64 });

/** What registering takes, here and in the data layer: the URL is checked by the handler (scheme, address). */
export const WebhookUrl = Type.String({ minLength: 1, maxLength: 2048 });
export const WebhookEvents = Type.Array(WebhookEventSchema, { uniqueItems: true, maxItems: WEBHOOK_EVENTS.length });
/** Endpoints a project may have: each one multiplies every event into a delivery. */
export const MAX_WEBHOOKS_PER_PROJECT = 20;

const Minted = Type.Intersect([Webhook, Type.Object({ secret: Type.String(), warning: Type.String() })]);

export const webhookRoutes = routes({
  'console.projects.webhooks.create': {
    method: 'POST',
    path: '/console/v1/projects/{id}/webhooks',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'projects:manage',
    summary:
      'Register an endpoint for message events (empty or absent events: every kind). The signing secret (whsec_…) is ' +
      'returned once. http or https only, and public addresses only unless the operator allows private ones; ' +
      `at most ${MAX_WEBHOOKS_PER_PROJECT} per project.`,
    params: Type.Object({ id: Id }),
    body: Obj({ url: WebhookUrl, events: Type.Optional(WebhookEvents) }),
    response: Minted,
  },
  'console.projects.webhooks.list': {
    method: 'GET',
    path: '/console/v1/projects/{id}/webhooks',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    summary: "The project's endpoints, without secrets. Their delivery attempts are /v1/webhook_deliveries/list.",
    params: Type.Object({ id: Id }),
    response: Type.Object({ webhooks: Type.Array(Webhook) }),
  },
  'console.projects.webhooks.delete': {
    method: 'DELETE',
    path: '/console/v1/projects/{id}/webhooks/{webhookId}',
    auth: PROJECT_AUTH,
    target: byId,
    scope: 'project:admin',
    permission: 'projects:manage',
    summary: 'Delete an endpoint, with its delivery attempts: attempts still pending are never made.',
    params: Type.Object({ id: Id, webhookId: Type.String({ maxLength: 64 }) }),
    response: Ok,
  },
});
