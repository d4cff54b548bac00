// Platform mail (password resets, invitations) goes into the durable outbox, inside the caller's
// transaction; the MTA delivers it from there. Bodies carry one-time links, so they are sealed.
import { randomUUID } from 'node:crypto';
import type { Queryable } from '../storage/pg/client.js';
import { enqueueNotification } from '../storage/pg/notification-outbox.js';
import type { CoreDeps } from './deps.js';

export async function queueNotification(
  q: Queryable,
  deps: CoreDeps,
  n: { kind: string; to: string; subject: string; text: string; now: Date },
): Promise<void> {
  const id = randomUUID();
  await enqueueNotification(q, {
    id,
    kind: n.kind,
    sender: deps.ctx.config.notifyFrom,
    recipient: n.to,
    subject: n.subject,
    now: n.now,
    bodySealed: deps.storage.sealer.seal(n.text, `notification_outbox:${id}`),
  });
}
