// docs/api.md §4.11 sendEmail and the test messages of §4.10 and §4.14: one pipeline (core/send.ts).
import type { sendRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { sendBatch, sendMessage, type OutgoingMessage, type SendOptions } from '../../core/send.js';

async function send(rc: RequestCtx, body: OutgoingMessage, projectId: string | null, opts?: SendOptions) {
  const sent = await sendMessage(rc.deps, body, projectId, rc.now, opts);
  rc.audit.projectId = sent.projectId;
  if (sent.replayed) rc.headers['Idempotent-Replayed'] = 'true';
  else rc.audit.targetId = sent.messageId;
  return { providerMessageId: sent.messageId, status: sent.status };
}

export const sendHandlers: Handlers<typeof sendRoutes> = {
  async 'v1.services.sendEmail'({ body }, rc) {
    const p = rc.principal;
    // The request's body is the message as given: its text can go once composed, and be read again if needed.
    return send(rc, body, p?.kind === 'project_api_key' ? p.projectId : null, {
      reread: () => rc.rereadBody() as OutgoingMessage,
    });
  },
  async 'v1.services.sendBatch'({ body }, rc) {
    const p = rc.principal;
    const sent = await sendBatch(
      rc.deps,
      body.messages,
      body.idempotencyKey,
      p?.kind === 'project_api_key' ? p.projectId : null,
      rc.now,
    );
    rc.audit.projectId = sent.projectId;
    if (sent.replayed) rc.headers['Idempotent-Replayed'] = 'true';
    return { data: sent.results.map((r) => ({ providerMessageId: r.messageId, status: r.status })) };
  },
  async 'console.projects.testMessage'({ body }, rc) {
    return send(rc, body, rc.access?.projectId ?? null);
  },
  async 'admin.testMessage'({ body }, rc) {
    const { projectId, ...message } = body;
    return send(rc, message, projectId);
  },
};
