// Spec §4.11 sendEmail and the test messages of §4.10 and §4.14: one pipeline.
import { createHash, randomUUID } from 'node:crypto';
import type { Static } from '@sinclair/typebox';
import type { SendBody, sendRoutes } from '../api/send.js';
import type { Handlers, RequestCtx } from '../deps.js';
import { ApiError, fail } from '../errors.js';
import { composeMessage, normalizeMailbox, parseFrom } from '../compose.js';
import { FREE_DAILY_LIMIT } from '../usage.js';
import { encodeReturnPath } from '../../mta/verp.js';
import { acceptMessage, findSendingCapability } from '../../storage/pg/messages.js';

/** gaps-filled.md #3: an idempotency key dedupes for 24 h. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

// RFC 5322 §2.2: a header field body must not contain a bare CR or LF; NUL is never valid in a header.
const HEADER_BREAK = /[\r\n\0]/;

/** JSON with sorted keys: the same body hashes the same whatever order its fields came in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

type Body = Static<typeof SendBody>;

/**
 * Validates, composes, and accepts one message. `projectId` is the project that must own the sender
 * domain, or null for send-on-behalf with the platform key (the domain's capability names the project).
 */
export async function send(rc: RequestCtx, body: Body, projectId: string | null) {
  const bad = (['to', 'from', 'subject'] as const).filter((f) => HEADER_BREAK.test(body[f]));
  if (bad.length) {
    throw fail('invalid_request', `Line breaks and NUL are not allowed in ${bad.join(', ')}.`,
      bad.map((f) => ({ field: `body.${f}`, message: 'must not contain CR, LF or NUL' })));
  }
  if (body.templateId !== undefined) throw fail('not_found', 'No such template.');
  if (body.text === undefined && body.html === undefined) {
    throw fail('invalid_request', 'Give text, html or templateId.', [{ field: 'body.text', message: 'one of text, html or templateId is required' }]);
  }
  const from = parseFrom(body.from);
  if (!from) throw fail('invalid_request', 'from is not an address or a "Name <address>".', [{ field: 'body.from', message: 'is not a valid address' }]);
  // The recipient as suppressions store it: the local part as given, the domain in lower case.
  const to = normalizeMailbox(body.to);
  if (!to) throw fail('invalid_request', 'to is not a valid address.', [{ field: 'body.to', message: 'is not a valid address' }]);

  const { db, spool } = rc.deps.storage;
  const fromDomain = from.address.slice(from.address.lastIndexOf('@') + 1);
  const cap = await findSendingCapability(db, fromDomain);
  if (!cap || (projectId !== null && cap.projectId !== projectId)) {
    throw fail('sender_domain_not_verified', `${fromDomain} is not a verified sending domain of this project.`);
  }

  const id = randomUUID();
  const messageIdHeader = `${id}@${fromDomain}`;
  const returnPath = encodeReturnPath(id, `${cap.returnPathSubdomain}.${cap.domain}`);
  // Spec §4.11 display-name rule: the message's own name, else the domain's default, else none.
  const name = from.name ?? cap.defaultDisplayName;
  const raw = await composeMessage({
    from: { name, address: from.address }, to, subject: body.subject, text: body.text, html: body.html,
    messageId: messageIdHeader, date: rc.now,
  });

  const outcome = await acceptMessage(
    db,
    {
      id, projectId: cap.projectId, organizationId: cap.organizationId, payg: cap.plan === 'payg', dailyLimit: FREE_DAILY_LIMIT,
      outboundId: cap.outboundId, fromHeader: name ? `${name} <${from.address}>` : from.address, fromAddress: from.address, to,
      subject: body.subject, messageIdHeader, returnPath, sizeBytes: raw.length, now: rc.now,
      idempotency: body.idempotencyKey ? { key: body.idempotencyKey, bodyHash: createHash('sha256').update(canonical(body)).digest('hex'), ttlMs: IDEMPOTENCY_TTL_MS } : null,
    },
    () => spool.enqueue(
      {
        id, projectId: cap.projectId, domain: to.slice(to.lastIndexOf('@') + 1), mailFrom: returnPath, rcptTo: to,
        outboundId: cap.outboundId, nextAttemptMs: rc.now.getTime(), attempts: 0, createdMs: rc.now.getTime(),
      },
      raw,
    ),
  );
  rc.audit.projectId = cap.projectId;
  switch (outcome.kind) {
    case 'accepted':
      rc.audit.targetId = outcome.messageId;
      return { providerMessageId: outcome.messageId, status: outcome.status };
    case 'replayed':
      rc.headers['Idempotent-Replayed'] = 'true';
      return { providerMessageId: outcome.messageId, status: outcome.status };
    case 'key_reused':
      throw fail('idempotency_key_reused', 'This idempotencyKey was used with a different body in the last 24 h.');
    case 'quota_exceeded':
      throw new ApiError('quota_exceeded', `The organization has sent its ${FREE_DAILY_LIMIT} messages for today (UTC); payg lifts the cap.`);
  }
}

export const sendHandlers: Handlers<typeof sendRoutes> = {
  async 'v1.services.sendEmail'({ body }, rc) {
    const p = rc.principal;
    return send(rc, body, p?.kind === 'project_api_key' ? p.projectId : null);
  },
  async 'console.projects.testMessage'({ body }, rc) {
    return send(rc, body, rc.access?.projectId ?? null);
  },
  async 'admin.testMessage'({ body }, rc) {
    const { projectId, ...message } = body;
    return send(rc, message, projectId);
  },
};
