// The sendEmail pipeline (docs/api.md §4.11), which the test messages of §4.10 and §4.14 and the webmail
// go through too: validate, render, compose, spool durably, accept (quota, suppression, idempotency).
import { createHash, randomUUID } from 'node:crypto';
import { ApiError, fail } from './errors.js';
import { timedWait, type CoreDeps } from './deps.js';
import { FREE_DAILY_LIMIT } from './usage.js';
import { renderTemplate } from './template-render.js';
import { renderedOrFail, usable } from './templates.js';
import {
  composeMessage,
  hasLoneSurrogate,
  MAX_LINE_LENGTH,
  parseFrom,
  type ComposeInput,
  type Mailbox,
} from '../mail/compose.js';
import { encodeReturnPath, returnPathMac } from '../mail/verp.js';
import { timeOrderedUuid } from '../mail/uuid.js';
import { extrasOf, hasExtras, type ExtraFields, type Extras } from './send-fields.js';
import { recipientsOf, type RecipientFields, type Recipients } from './send-recipients.js';
import { parseScheduledAt } from './schedule.js';
import { simulatorDomain } from '../mail/simulator.js';
import type { SpoolEntry } from '../storage/lmdb/spool.js';
import {
  acceptMessage,
  acceptMessages,
  findSendingCapability,
  type AcceptOutcome,
  type AcceptStatus,
  type NewMessage,
  type SendingCapability,
} from '../storage/pg/messages.js';

/** docs/decisions.md #3: an idempotency key dedupes for 24 h. */
export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;

// RFC 5322 §2.2: a header field body must not contain a bare CR or LF; NUL is never valid in a header.
const HEADER_BREAK = /[\r\n\0]/;

/** JSON with sorted keys: the same body hashes the same whatever order its fields came in. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/**
 * A message to send, as sendEmail takes it (docs/api.md §4.11); the extra fields (replyTo, headers,
 * attachments, tags, metadata) are checked by core/send-fields.ts.
 */
export interface OutgoingMessage extends ExtraFields, RecipientFields {
  from: string;
  subject: string;
  text?: string;
  html?: string;
  idempotencyKey?: string;
  templateId?: string;
  /** Values of the {{name}} placeholders. */
  variables?: Readonly<Record<string, unknown>>;
  unsubscribeUrl?: string;
  /** docs/api.md §4.11: an ISO 8601 time, in the future and at most 30 days ahead, before which it does not leave. */
  scheduledAt?: string;
  /**
   * The webmail's extra fields (core/webmail-send.ts), never taken from the sendEmail route's body: the To and
   * Cc the message shows, the message answered, and attachments.
   */
  compose?: Pick<ComposeInput, 'displayTo' | 'cc' | 'inReplyTo' | 'references' | 'attachments'>;
}

type Body = OutgoingMessage;

/** What a send answers: the message and whether it is a replay of an earlier send with the same idempotency key. */
export interface Sent {
  projectId: string;
  messageId: string;
  status: AcceptStatus;
  replayed: boolean;
}

/** The longest unsubscribe URL in ASCII form: `List-Unsubscribe: <` and `>` beside it fill a 998-octet line. */
const MAX_UNSUBSCRIBE_HREF = MAX_LINE_LENGTH - 'List-Unsubscribe: <>'.length;

/**
 * RFC 8058 one-click unsubscribe: List-Unsubscribe with the https URL (§3.1 requires https for the
 * POST), and List-Unsubscribe-Post saying the receiver may POST to it without a human.
 */
function unsubscribeHeaders(url: string | undefined): Record<string, string> | undefined {
  if (url === undefined) return undefined;
  let u: URL | null = null;
  try {
    u = new URL(url);
  } catch {
    // reported below
  }
  // The URL goes between angle brackets in a header (RFC 2369 §2): no space, no '>' or line break.
  if (!u || u.protocol !== 'https:' || !u.hostname || /[\s<>"\0]/.test(url)) {
    throw fail('invalid_request', 'unsubscribeUrl must be an https URL.', [
      { field: 'body.unsubscribeUrl', message: 'must be an absolute https URL without spaces or angle brackets' },
    ]);
  }
  // The URL's ASCII form (punycode host, percent-encoded path and query, as WHATWG URL serializes it): a
  // non-ASCII character would make the composer write the whole field as an encoded word (RFC 2047), which
  // no receiver reads as a URL, and one-click unsubscribe would silently break.
  // That form is longer than the URL as given (up to 9 characters for one), and the field is written on one line
  // (mail/compose.ts, never folded): `List-Unsubscribe: <…>` within RFC 5322 §2.1.1's 998 octets.
  if (u.href.length > MAX_UNSUBSCRIBE_HREF) {
    throw fail('invalid_request', 'unsubscribeUrl is too long.', [
      {
        field: 'body.unsubscribeUrl',
        message: `must be at most ${MAX_UNSUBSCRIBE_HREF} characters as ASCII (punycode host, percent-encoded path)`,
      },
    ]);
  }
  return { 'List-Unsubscribe': `<${u.href}>`, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' };
}

/**
 * What the message says. With `templateId` (docs/api.md §4.11), html and text are the template's (of the
 * sending project's organization, or public; else 404), rendered with `variables` over its defaults;
 * the subject stays the request's (required, also with a template), rendered with the same values.
 * With `variables` alone the request's own subject, html and text are rendered. With neither, all
 * three go out as given, `{{` and all. The message records the template and the version it used.
 */
async function renderContent(deps: CoreDeps, body: Body, organizationId: string) {
  const own = {
    subject: body.subject,
    html: body.html,
    text: body.text,
    template: null as { id: string; version: number } | null,
  };
  if (body.templateId === undefined && body.variables === undefined) return own;
  const t =
    body.templateId === undefined ? null : usable(await deps.storage.caches.templates(body.templateId), organizationId);
  const parts = renderedOrFail(
    renderTemplate(
      { subject: body.subject, html: t ? t.html : (body.html ?? null), text: t ? t.text : (body.text ?? null) },
      t?.variables ?? [],
      body.variables,
    ),
    'body.variables',
  );
  return {
    subject: parts.subject ?? body.subject,
    html: parts.html ?? undefined,
    text: parts.text ?? undefined,
    template: t ? { id: t.id, version: t.version } : null,
  };
}

/** A send that passed the checks that need no database: what composing and accepting it takes. */
interface Prepared {
  body: Body;
  from: Mailbox;
  fromDomain: string;
  to: Recipients;
  extras: Extras | null;
  /** List-Unsubscribe and the extra headers. */
  headers: Record<string, string> | undefined;
  scheduledAt: Date | null;
}

/** The checks of a send that need no database; each refusal a 400 naming its field (`body.<field>`). */
function prepare(body: Body, now: Date): Prepared {
  // `to` is core/send-recipients.ts's (it may be an array), which names the item.
  const bad = (['from', 'subject'] as const).filter((f) => HEADER_BREAK.test(body[f]));
  if (bad.length) {
    throw fail(
      'invalid_request',
      `Line breaks and NUL are not allowed in ${bad.join(', ')}.`,
      bad.map((f) => ({ field: `body.${f}`, message: 'must not contain CR, LF or NUL' })),
    );
  }
  // As in `from` (parseFrom): a lone surrogate is not text, and would silently become U+FFFD on the wire.
  if (hasLoneSurrogate(body.subject))
    throw fail('invalid_request', 'The subject is not valid Unicode text.', [
      { field: 'body.subject', message: 'must not contain a lone UTF-16 surrogate' },
    ]);
  if (body.templateId === undefined && body.text === undefined && body.html === undefined) {
    throw fail('invalid_request', 'Give text, html or templateId.', [
      { field: 'body.text', message: 'one of text, html or templateId is required' },
    ]);
  }
  const from = parseFrom(body.from);
  if (!from)
    throw fail('invalid_request', 'from is not an address or a "Name <address>".', [
      { field: 'body.from', message: 'is not a valid address' },
    ]);
  // The recipients as suppressions store them: the local part as given, the domain in lower case.
  const to = recipientsOf(body);
  // Only a message that has extra fields pays for their checks (and the base64 decoding of attachments).
  const extras = hasExtras(body) ? extrasOf(body) : null;
  const headers = extras?.headers
    ? { ...unsubscribeHeaders(body.unsubscribeUrl), ...extras.headers }
    : unsubscribeHeaders(body.unsubscribeUrl);
  const scheduledAt =
    body.scheduledAt === undefined ? null : parseScheduledAt(body.scheduledAt, now, 'body.scheduledAt');
  const fromDomain = from.address.slice(from.address.lastIndexOf('@') + 1);
  return { body, from, fromDomain, to, extras, headers, scheduledAt };
}

/** What a caller of sendMessage may give besides the message. */
export interface SendOptions {
  /**
   * The message again, as it was given (the request's JSON parsed anew). With it, the text and html of the message
   * given are dropped, from the caller's object, once composed: a sendEmail otherwise holds them (100 kB strings at
   * that size) until its row commits, through young-generation collections that copy them and then promote them (a
   * few percent of the control's CPU a 100 kB message, docs/decisions.md #77). The rare second composition, when the
   * cached sending capability is found stale at commit, starts from this.
   */
  reread?: () => Body;
}

/**
 * Validates, composes, and accepts one message: the pipeline of sendEmail, of the test messages and of
 * the webmail. `projectId` is the project that must own the sender domain, or null for send-on-behalf
 * with the platform key (the domain's capability names the project). The body of a message that is not
 * queued is never kept; refusals throw ApiError (422 sender_domain_not_verified, 409, 429).
 */
export async function sendMessage(
  deps: CoreDeps,
  body: Body,
  projectId: string | null,
  now: Date,
  opts: SendOptions = {},
): Promise<Sent> {
  let p = prepare(body, now);
  const { fromDomain } = p;
  const { db } = deps.storage;
  const refused = () =>
    fail('sender_domain_not_verified', `${fromDomain} is not a verified sending domain of this project.`);
  const senders = deps.storage.caches.senders;
  // A cached capability only ever speeds up a send that succeeds: acceptMessage's statement checks it
  // still stands as cached, and every refusal is decided on a fresh lookup.
  const cachedCap = senders.get(fromDomain);
  let fromCache = cachedCap !== undefined;
  let cap = cachedCap ?? (await findSendingCapability(db, fromDomain));
  const lookAgain = async () => {
    senders.delete(fromDomain);
    if (!fromCache) throw refused();
    fromCache = false;
    return findSendingCapability(db, fromDomain);
  };
  for (;;) {
    if (!cap || (projectId !== null && cap.projectId !== projectId)) {
      cap = await lookAgain();
      continue;
    }
    senders.set(fromDomain, cap);

    const outcome = await composeAndAccept(deps, now, p, cap, opts.reread !== undefined);
    if (outcome.kind === 'sender_changed') {
      cap = await lookAgain();
      if (opts.reread) p = { ...p, body: opts.reread() };
      continue;
    }
    return settle(cap, outcome);
  }
}

/**
 * Feedback-ID (Google's feedback loop, no RFC: `a:b:c:SenderId`, the last field the sender's constant id, the
 * others its own identifiers): spam complaints are counted per sending capability and per project, so a
 * complaint rate names the customer. DKIM-signed with the message (mail/dkim-sign.ts); customers cannot set it
 * (core/send-fields.ts). The ids are UUIDs, which hold no colon.
 */
export const feedbackId = (cap: Pick<SendingCapability, 'outboundId' | 'projectId'>): string =>
  `${cap.outboundId}:${cap.projectId}:svc`;

/** A message rendered and composed, with its spool entry and the row to accept. */
interface Composed {
  id: string;
  raw: Buffer;
  entry: SpoolEntry;
  message: Omit<NewMessage, 'idempotency'>;
}

/** Renders and composes the message as sent by `cap`. */
async function compose(deps: CoreDeps, now: Date, p: Prepared, cap: SendingCapability): Promise<Composed> {
  const { body, extras, from, to } = p;
  const content = await renderContent(deps, body, cap.organizationId);
  const id = timeOrderedUuid();
  // Unrelated to the id (docs/decisions.md #53): the Message-ID travels with every copy, forwards and
  // quotes, and must not tell anyone the return path.
  const messageIdHeader = `${randomUUID()}@${p.fromDomain}`;
  const returnPath = encodeReturnPath(
    id,
    `${cap.returnPathSubdomain}.${cap.domain}`,
    returnPathMac(deps.storage.sealer),
  );
  // docs/api.md §4.11 display-name rule: the message's own name, else the domain's default, else none.
  const name = from.name ?? cap.defaultDisplayName;
  const first = to.list[0]!.address;
  const raw = await composeMessage({
    from: { name, address: from.address },
    to: first,
    ...(to.header ? { displayTo: to.header.to, ...(to.header.cc.length ? { cc: to.header.cc } : {}) } : {}),
    subject: content.subject,
    text: content.text,
    html: content.html,
    messageId: messageIdHeader,
    date: now,
    headers: p.headers ? { ...p.headers, 'Feedback-ID': feedbackId(cap) } : { 'Feedback-ID': feedbackId(cap) },
    ...extras?.compose,
    ...body.compose,
  });
  return {
    id,
    raw,
    entry: spoolEntry(id, cap, returnPath, to, now.getTime(), p.scheduledAt?.getTime() ?? now.getTime()),
    message: {
      id,
      sender: cap,
      dailyLimit: FREE_DAILY_LIMIT,
      fromHeader: name ? `${name} <${from.address}>` : from.address,
      fromAddress: from.address,
      to: first,
      recipients: to.list.length > 1 ? to.list : null,
      subject: content.subject,
      messageIdHeader,
      returnPath,
      sizeBytes: raw.length,
      template: content.template,
      tags: extras?.tags ?? null,
      metadata: extras?.metadata ?? null,
      now: now,
      scheduledAt: p.scheduledAt,
      simulatorDomain: simulatorDomain(deps.ctx.config.hostname),
    },
  };
}

const bodyHash = (v: unknown) => createHash('sha256').update(canonical(v)).digest('hex');

/** A Composed whose octets are let go (undefined) once spooled. */
type Spooling = Omit<Composed, 'raw'> & { raw: Buffer | undefined };

/**
 * Renders, composes, spools and accepts the message as sent by `cap`. The body is durable before the
 * row commits (acceptMessage), and taken back unless the message is queued.
 */
async function composeAndAccept(
  deps: CoreDeps,
  now: Date,
  p: Prepared,
  cap: SendingCapability,
  /** Whether the message's text and html go once composed (SendOptions.reread). */
  release: boolean,
): Promise<AcceptOutcome> {
  const { spool } = deps.storage;
  // Hashed while the body is whole.
  const idempotency = p.body.idempotencyKey
    ? { key: p.body.idempotencyKey, bodyHash: bodyHash(p.body), ttlMs: IDEMPOTENCY_TTL_MS }
    : null;
  const composed: Spooling = await compose(deps, now, p, cap);
  const { id, entry, message } = composed;
  if (release) {
    delete p.body.text;
    delete p.body.html;
  }
  await timedWait(deps, 'spool', () => spool.enqueue(entry, composed.raw!));
  // The spool has the octets: let go of them before the accepting statement's wait. Held through it, a buffer
  // outlives young-generation collections and is promoted (docs/decisions.md #84).
  composed.raw = undefined;
  // No cleanup of the body when this throws: the error may come after Postgres committed (a connection lost
  // before the reply), and then the row needs its body. The MTA decides by the row: without one after its
  // grace, the body goes (mta/outbound/worker.ts); with one, the message is delivered, once.
  const outcome = await timedWait(deps, 'accept', () => acceptMessage(deps.storage, { ...message, idempotency }));
  if (outcome.kind !== 'accepted' || outcome.status !== 'queued') await spool.remove(id);
  // Committed: a delivery worker in this process takes it now, not at its next poll (docs/decisions.md #86).
  else spool.wake();
  // And a suppressed recipient's webhooks go now from a dispatcher in this process (#88).
  if (outcome.kind === 'accepted' && outcome.webhooksDue) deps.storage.webhooksDue.wake();
  return outcome;
}

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1);

/**
 * The spool entry of a message: one envelope (SMTP transaction) per recipient domain (docs/api.md §4.11), each
 * with its own schedule; a message to one recipient has the entry's own domain and rcptTo and no list.
 */
function spoolEntry(
  id: string,
  cap: SendingCapability,
  mailFrom: string,
  to: Recipients,
  createdMs: number,
  atMs: number,
): SpoolEntry {
  const first = to.list[0]!.address;
  const entry: SpoolEntry = {
    id,
    projectId: cap.projectId,
    domain: domainOf(first),
    mailFrom,
    rcptTo: first,
    outboundId: cap.outboundId,
    // A scheduled message's entry is due at its time: the spool's order is the schedule.
    nextAttemptMs: atMs,
    attempts: 0,
    createdMs,
    // composeMessage's bytes, which its wire check found CRLF-only (SpoolEntry.crlfOnly).
    crlfOnly: true,
  };
  if (to.list.length === 1) return entry;
  const byDomain = new Map<string, string[]>();
  for (const r of to.list) {
    const d = domainOf(r.address);
    const l = byDomain.get(d);
    if (l) l.push(r.address);
    else byDomain.set(d, [r.address]);
  }
  entry.envelopes = [...byDomain].map(([domain, rcpts]) => ({ domain, rcpts, nextAttemptMs: atMs, attempts: 0 }));
  return entry;
}

function settle(cap: SendingCapability, outcome: Exclude<AcceptOutcome, { kind: 'sender_changed' }>): Sent {
  switch (outcome.kind) {
    case 'accepted':
    case 'replayed':
      return {
        projectId: cap.projectId,
        messageId: outcome.messageId,
        status: outcome.status,
        replayed: outcome.kind === 'replayed',
      };
    case 'key_reused':
      throw fail('idempotency_key_reused', 'This idempotencyKey was used with a different body in the last 24 h.');
    case 'quota_exceeded':
      throw new ApiError(
        'quota_exceeded',
        `The organization has sent its ${FREE_DAILY_LIMIT} messages for today (UTC); payg lifts the cap.`,
      );
  }
}

/** What sendBatch answers: a result per message, in order, and whether it is a replay. */
export interface BatchSent {
  projectId: string;
  results: { messageId: string; status: AcceptStatus }[];
  replayed: boolean;
}

/** An ApiError's field details moved under the batch item they are about: body.x → body.messages[i].x. */
function underItem(err: ApiError, i: number): { field: string; message: string }[] {
  const details = Array.isArray(err.details) ? (err.details as { field: string; message: string }[]) : [];
  const at = (f: string) => (f === 'body' ? `body.messages[${i}]` : f.replace(/^body\./, `body.messages[${i}].`));
  return details.length
    ? details.map((d) => ({ field: at(d.field), message: d.message }))
    : [{ field: `body.messages[${i}]`, message: err.message }];
}

/**
 * sendBatch (docs/api.md §4.11): 1 to 100 sendEmail bodies, all or none. Every item is checked before anything
 * is written, and any refusal is one answer naming each item's fields (`body.messages[i].field`); then every
 * message is composed, all bodies are spooled in one durable commit, and all rows are accepted in one
 * transaction (storage/pg/messages.ts acceptMessages), with the batch's idempotency key if given. A refusal of
 * the whole (429 quota_exceeded, 409) takes every body back. Senders are looked up fresh: a batch is rare enough
 * not to need the cache, and a capability that changes under it refuses the batch (422).
 */
export async function sendBatch(
  deps: CoreDeps,
  bodies: readonly Body[],
  idempotencyKey: string | undefined,
  projectId: string | null,
  now: Date,
): Promise<BatchSent> {
  const { db, spool } = deps.storage;
  const problems: { field: string; message: string }[] = [];
  const prepared: Prepared[] = [];
  bodies.forEach((b, i) => {
    try {
      prepared.push(prepare(b, now));
    } catch (err) {
      if (!(err instanceof ApiError) || err.code !== 'invalid_request') throw err;
      problems.push(...underItem(err, i));
    }
  });
  if (problems.length)
    throw fail(
      'invalid_request',
      `Invalid batch: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}.`,
      problems,
    );

  const caps = new Map<string, SendingCapability | null>();
  for (const p of prepared)
    if (!caps.has(p.fromDomain)) caps.set(p.fromDomain, await findSendingCapability(db, p.fromDomain));
  // Send-on-behalf: the batch's project is that of its first sender; every message must be of one project.
  const project = projectId ?? caps.get(prepared[0]!.fromDomain)?.projectId ?? null;
  const unverified = prepared.flatMap((p, i) =>
    caps.get(p.fromDomain)?.projectId === project && project !== null
      ? []
      : [
          {
            field: `body.messages[${i}].from`,
            message: `${p.fromDomain} is not a verified sending domain of this project`,
          },
        ],
  );
  if (unverified.length || project === null)
    throw fail(
      'sender_domain_not_verified',
      `Not verified sending domains of this project: ${[...new Set(unverified.map((u) => u.field))].join(', ')}.`,
      unverified,
    );

  const composed: Spooling[] = [];
  for (const [i, p] of prepared.entries()) {
    try {
      composed.push(await compose(deps, now, p, caps.get(p.fromDomain)!));
    } catch (err) {
      // A template refused (404, 422): the same error, naming the item.
      if (err instanceof ApiError)
        throw new ApiError(err.code, `body.messages[${i}]: ${err.message}`, underItem(err, i));
      throw err;
    }
  }
  const ids = composed.map((c) => c.id);
  await timedWait(deps, 'spool', () => spool.enqueueMany(composed.map((c) => ({ entry: c.entry, body: c.raw! }))));
  // As for one message (composeAndAccept): the octets go once spooled.
  for (const c of composed) c.raw = undefined;
  // As for one message: no cleanup when this throws, since the rows may have committed (composeAndAccept).
  const outcome = await timedWait(deps, 'accept', () =>
    acceptMessages(
      db,
      composed.map((c) => ({ ...c.message, idempotency: null })),
      idempotencyKey
        ? {
            projectId: project,
            key: idempotencyKey,
            bodyHash: bodyHash({ batch: bodies }),
            ttlMs: IDEMPOTENCY_TTL_MS,
          }
        : null,
    ),
  );
  if (outcome.kind !== 'accepted') await spool.removeMany(ids);
  switch (outcome.kind) {
    case 'accepted': {
      const suppressed = ids.filter((_, i) => outcome.statuses[i] !== 'queued');
      if (suppressed.length) await spool.removeMany(suppressed);
      if (suppressed.length < ids.length) spool.wake();
      if (outcome.webhooksDue) deps.storage.webhooksDue.wake();
      return {
        projectId: project,
        results: ids.map((id, i) => ({ messageId: id, status: outcome.statuses[i]! })),
        replayed: false,
      };
    }
    case 'replayed':
      return { projectId: project, results: outcome.results, replayed: true };
    case 'key_reused':
      throw fail('idempotency_key_reused', 'This idempotencyKey was used with a different body in the last 24 h.');
    case 'quota_exceeded':
      throw new ApiError(
        'quota_exceeded',
        `The batch would pass the organization's ${FREE_DAILY_LIMIT} messages for today (UTC); nothing was queued.`,
      );
    case 'sender_changed':
      throw fail('sender_domain_not_verified', 'A sending domain of the batch changed meanwhile; nothing was queued.');
  }
}
