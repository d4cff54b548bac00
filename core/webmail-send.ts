// Writing mail in the webmail (docs/api.md §4.15): drafts kept in the Drafts folder while written, and sending
// through the sendEmail pipeline (core/send.ts) from the inbox's own address, when the inbox's domain has a
// verified outbound capability in the inbox's project. A message to several people goes out as one accepted
// message per recipient (each counted against the organization's daily allowance, as any send), all showing the
// same To and Cc; one copy of what was sent is kept in Sent.
import { randomUUID } from 'node:crypto';
import MailComposer from 'nodemailer/lib/mail-composer';
import type { CoreDeps } from './deps.js';
import { fail } from './errors.js';
import { sendMessage } from './send.js';
import { normalizeMailbox } from '../mail/compose.js';
import { parseMimeTree } from '../mail/mime-tree.js';
import { addFlag, dropDraft, folderByRole, ownMessage, sendingState, type WebmailSession } from './webmail.js';

/** The attachments of one message together, decoded (the request itself may be up to 48 MB of base64). */
export const MAX_ATTACHMENT_BYTES = 25 * 1024 * 1024;

export interface DraftInput {
  to: string[];
  cc?: string[];
  subject: string;
  text: string;
  attachments?: { filename: string; contentType: string; contentBase64: string }[];
  inReplyTo?: string;
  references?: string[];
  draftId?: string;
  answering?: string;
}

function attachmentsOf(d: DraftInput) {
  const out = (d.attachments ?? []).map((a) => ({
    filename: a.filename.replace(/[\r\n\0]/g, ' '),
    contentType: /^[\w.+-]+\/[\w.+-]+$/.test(a.contentType) ? a.contentType.toLowerCase() : 'application/octet-stream',
    content: Buffer.from(a.contentBase64, 'base64'),
  }));
  const total = out.reduce((n, a) => n + a.content.length, 0);
  if (total > MAX_ATTACHMENT_BYTES) {
    throw fail('payload_too_large', `Attachments are limited to ${MAX_ATTACHMENT_BYTES / 1024 / 1024} MB in all.`);
  }
  return out;
}

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1);
const cleanIds = (ids: (string | undefined)[]) =>
  ids.filter((i): i is string => !!i && /^[^<>\s]+@[^<>\s]+$/.test(i)).slice(-50);

/** The stored copy (Drafts or Sent): every recipient as typed, the attachments, the thread headers. */
async function copyBytes(s: WebmailSession, d: DraftInput, now: Date): Promise<Buffer> {
  const clean = (v: string) => v.replace(/[\r\n\0]/g, ' ');
  const composer = new MailComposer({
    from: s.address,
    to: d.to.map(clean).join(', ') || undefined,
    cc: (d.cc ?? []).map(clean).join(', ') || undefined,
    subject: clean(d.subject),
    text: d.text,
    messageId: `<${randomUUID()}@${domainOf(s.address)}>`,
    date: now,
    ...(d.inReplyTo ? { inReplyTo: `<${cleanIds([d.inReplyTo])[0] ?? ''}>` } : {}),
    ...(d.references?.length ? { references: cleanIds(d.references).map((r) => `<${r}>`) } : {}),
    attachments: attachmentsOf(d),
    newline: 'win',
    disableFileAccess: true,
    disableUrlAccess: true,
  });
  return composer.compile().build();
}

async function store(
  deps: CoreDeps,
  s: WebmailSession,
  role: 'drafts' | 'sent',
  bytes: Buffer,
  flags: string[],
  now: Date,
) {
  const mb = await folderByRole(deps, s, role);
  const tree = parseMimeTree(bytes);
  const { blobs, store: mail } = deps.storage.mail;
  const blob = await blobs.put(bytes);
  try {
    const out = await mail.append({
      mailboxId: mb.id,
      blob,
      internalDate: now,
      flags,
      messageId: tree.messageId,
      envelope: tree.envelope,
      structure: tree,
      enforceLimit: true,
    });
    if (out.kind === 'over_quota') throw fail('conflict', 'The inbox is over its storage limit.');
    if (out.kind !== 'appended') throw fail('not_found', 'The folder no longer exists.');
    return out.id;
  } finally {
    await blobs.release(blob.address).catch((err) => deps.ctx.log.warn({ err }, 'webmail: blob release failed'));
  }
}

export async function saveDraft(deps: CoreDeps, s: WebmailSession, d: DraftInput, now: Date) {
  const id = await store(deps, s, 'drafts', await copyBytes(s, d, now), ['\\Draft', '\\Seen'], now);
  if (d.draftId && d.draftId !== id) await dropDraft(deps, s, d.draftId);
  return { draftId: id };
}

export async function sendFromWebmail(deps: CoreDeps, s: WebmailSession, d: DraftInput, now: Date) {
  const state = await sendingState(deps, s);
  if (!state.canSend || !state.projectId) throw fail('sender_domain_not_verified', state.reason ?? 'Cannot send.');
  const bad = [...d.to, ...(d.cc ?? [])].filter((a) => !normalizeMailbox(a.trim()));
  if (bad.length) {
    throw fail(
      'invalid_request',
      `Not valid addresses: ${bad.join(', ')}.`,
      bad.map((a) => ({ field: 'body.to', message: `${a} is not a valid address` })),
    );
  }
  const to = d.to.map((a) => normalizeMailbox(a.trim())!);
  const cc = (d.cc ?? []).map((a) => normalizeMailbox(a.trim())!);
  const recipients = [...new Set([...to, ...cc].map((a) => a.toLowerCase()))].map((lower) =>
    [...to, ...cc].find((a) => a.toLowerCase() === lower)!,
  );
  if (!recipients.length)
    throw fail('invalid_request', 'Add a recipient.', [{ field: 'body.to', message: 'is empty' }]);
  const answered = d.answering ? await ownMessage(deps, s, d.answering) : null;
  const attachments = attachmentsOf(d);
  const refs = cleanIds([...(d.references ?? []), d.inReplyTo]);
  const sent = [];
  for (const rcpt of recipients) {
    const r = await sendMessage(
      deps,
      {
        to: rcpt,
        from: s.address,
        subject: d.subject,
        text: d.text || ' ',
        compose: {
          displayTo: to,
          ...(cc.length ? { cc } : {}),
          ...(d.inReplyTo && cleanIds([d.inReplyTo]).length ? { inReplyTo: cleanIds([d.inReplyTo])[0] } : {}),
          ...(refs.length ? { references: refs } : {}),
          ...(attachments.length ? { attachments } : {}),
        },
      },
      state.projectId,
      now,
    );
    sent.push({ to: rcpt, providerMessageId: r.messageId, status: r.status });
  }
  const sentCopyId = await store(deps, s, 'sent', await copyBytes(s, d, now), ['\\Seen'], now).catch((err) => {
    deps.ctx.log.warn({ err }, 'webmail: the Sent copy was not stored');
    return null;
  });
  if (d.draftId) await dropDraft(deps, s, d.draftId);
  if (answered) await addFlag(deps, answered, '\\Answered');
  return { sent, sentCopyId };
}
