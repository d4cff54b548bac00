// DATA on the MX listener: the message goes to every recipient accepted at RCPT (mta/inbound/recipients.ts),
// inboxes and VERP return paths alike, and the 250 is written only after all of it is durable
// (docs/api.md §6 item 5, docs/decisions.md #19).
//
// For inboxes, the message is read once, as a stream, into three readers at once: the blob store (the
// stored body: the message minus the Authentication-Results fields in our name, mta/inbound/authenticate.ts),
// the MIME scanner (mail/mime-tree.ts: envelope, structure, Message-ID, preview, computed once) and
// mailauth (which hashes the body as it passes, when a DKIM or ARC signature asks for it). Only the header
// block is held in memory (at most MAX_HEADER_BYTES), plus, when the same message also goes to a VERP
// return path, the report itself (at most MAX_REPORT_BYTES, as before).
//
// Order, so that nothing acknowledged is lost and nothing half-stored is visible:
// 1. the body is in the blob store and synced (`put` resolves once durable; it holds one reference);
// 2. one transaction commits a row in every recipient's inbox (`appendGrouped`: concurrent deliveries share
//    a transaction, each answered after its commit), each row with a reference to the body, the first row
//    taking over the put's (INBOX or Junk, the prefix fields, INTERNALDATE now, billing started,
//    docs/decisions.md #18);
// 3. when that first row was not stored, the put's reference is given back;
// 4. only then the 250.
// A crash before 2 commits leaves a body no row points to (a leaked reference, never a visible message);
// the client got no 250 and sends again. Every inbox gets its copy in the same commit, so the retry after
// a crash never duplicates the message in some inboxes. An unexpected failure anywhere answers 451 4.3.0
// (mail/smtp-reply.ts).
import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { SMTPServerDataStream, SMTPServerSession } from 'smtp-server';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import type { BlobRef } from '../../mail/blob-store.js';
import type { AppendOutcome } from '../../mail/mail-store.js';
import { authHeaderProblem } from '../../mail/auth-header-budget.js';
import { mimeTreeScanner, type MimeTree } from '../../mail/mime-tree.js';
import { MESSAGE_TOO_BIG } from '../../mail/smtp-reply.js';
import { recordReport } from '../../storage/pg/reports.js';
import { parseReport, reportOutcome, reportRecipients } from './reports.js';
import { readCapped } from './limits.js';
import { recipientsOf, type InboxRecipient, type ReportRecipient } from './recipients.js';
import {
  authenticateMessage,
  carriesSignatures,
  headerEnd,
  mailauthResolver,
  notAuthenticated,
  removeOurAuthResults,
  traceFields,
  unauthenticated,
  type Verdict,
} from './authenticate.js';

/**
 * The largest DSN or ARF report read (they are read whole). Reports are small: a DSN carries the headers of
 * the original, or the original itself, which RFC 3464 §2 lets the reporter cut. 2 MB holds the returned
 * message of any normal send; past that it is refused (552).
 */
export const MAX_REPORT_BYTES = 2 * 1024 * 1024;
/**
 * The largest header block held while its Authentication-Results fields are looked at. Postfix holds at
 * most 100 KB of one header field (header_size_limit); a whole block past 1 MiB is not mail.
 */
export const MAX_HEADER_BYTES = 1024 * 1024;

export interface ReceiveDeps {
  ctx: Context;
  storage: Storage;
  /** The SIZE the listener announces (RFC 1870): a message past it is refused, and nothing of it stored. */
  maxBytes: number;
}

type DataStream = SMTPServerDataStream & { sizeExceeded?: boolean };

const tooBig = (maxBytes: number) => MESSAGE_TOO_BIG.with(`Message too big (at most ${maxBytes} bytes)`);

/** The onData hook: resolves once every accepted recipient has the message durably. */
export async function receiveMessage(stream: DataStream, session: SMTPServerSession, deps: ReceiveDeps): Promise<void> {
  const { inboxes, reports } = recipientsOf(session.envelope);
  if (!inboxes.length) {
    const raw = await readCapped(stream, Math.min(MAX_REPORT_BYTES, deps.maxBytes));
    if (!raw) {
      throw stream.sizeExceeded
        ? tooBig(deps.maxBytes)
        : MESSAGE_TOO_BIG.with(`Report too big (at most ${MAX_REPORT_BYTES} bytes)`);
    }
    await recordReports(raw, reports, deps);
    return;
  }
  const got = await readMessage(stream, session, deps, reports.length > 0);
  // The first inbox's row takes the put's reference; when it is not stored (or the append throws and the
  // client sends again), the reference is given back here.
  let first: AppendOutcome | null = null;
  try {
    first = await appendToAll(inboxes, got, session, deps, deps.ctx.clock.now());
  } finally {
    if (first?.kind !== 'appended') {
      await deps.storage.mail.blobs.release(got.blob.address).catch((err: unknown) => {
        deps.ctx.log.warn({ err, blob: got.blob.address }, 'inbound: the put reference was not given back (a leak)');
      });
    }
  }
  if (reports.length) {
    if (got.raw) await recordReports(got.raw, reports, deps);
    else deps.ctx.log.warn({ session: session.id }, 'inbound: report too big to read, ignored');
  }
}

interface Received {
  blob: BlobRef;
  tree: MimeTree;
  verdict: Verdict;
  /** The message as received, when a report recipient needs it and it fits MAX_REPORT_BYTES. */
  raw: Buffer | null;
}

async function appendToAll(
  recipients: readonly InboxRecipient[],
  got: Received,
  session: SMTPServerSession,
  { ctx, storage }: ReceiveDeps,
  now: number,
): Promise<AppendOutcome> {
  const sender = session.envelope.mailFrom ? session.envelope.mailFrom.address : '';
  const outcomes = await storage.mail.store.appendGrouped(
    recipients.map((r, i) => ({
      mailboxId: got.verdict.junk ? r.junkMailboxId : r.inboxMailboxId,
      blob: got.blob,
      takesCallerRef: i === 0,
      prefix: Buffer.from(
        traceFields({
          helo: session.hostNameAppearsAs || '',
          ip: session.remoteAddress,
          hostname: ctx.config.hostname,
          protocol: session.transmissionType,
          id: session.id,
          tls: session.tlsOptions || null,
          recipient: r.address,
          sender,
          now,
        }) +
          got.verdict.authenticationResults +
          got.verdict.receivedSpf,
        'latin1',
      ),
      internalDate: new Date(now),
      messageId: got.tree.messageId,
      envelope: got.tree.envelope,
      // The whole tree (offsets into the stored body, which starts after the prefix), with the preview.
      structure: got.tree,
      startBillingAt: new Date(now),
    })),
  );
  for (const [i, out] of outcomes.entries()) {
    const inboxId = recipients[i]!.inboxId;
    if (out.kind === 'appended')
      ctx.log.info(
        { inboxId, uid: out.uid, size: out.size, junk: got.verdict.junk, session: session.id },
        'inbound mail stored',
      );
    // The inbox was deleted between RCPT and DATA: nobody is left to read it.
    else ctx.log.warn({ inboxId, outcome: out.kind, session: session.id }, 'inbound mail not stored');
  }
  return outcomes[0]!;
}

/** Writes, waiting for the reader to catch up (backpressure), unless the pipeline has failed meanwhile. */
async function write(targets: readonly PassThrough[], chunk: Buffer, failed: Promise<void>): Promise<void> {
  const waits: Promise<unknown>[] = [];
  // A reader that fails destroys the streams: its own promise says so, and `failed` ends the wait.
  for (const t of targets) if (!t.destroyed && !t.write(chunk)) waits.push(once(t, 'drain').catch(() => {}));
  if (waits.length) await Promise.race([Promise.all(waits), failed]);
}

/**
 * Reads the DATA stream to its end (never abandoning it: smtp-server replies only once the client has
 * sent the final dot) into the blob store, the MIME scanner and mailauth. Throws the SmtpReply for a
 * message too big, or the first reader's failure; a body already put is then given back.
 */
async function readMessage(
  stream: DataStream,
  session: SMTPServerSession,
  { ctx, storage, maxBytes }: ReceiveDeps,
  keepRaw: boolean,
): Promise<Received> {
  const original = new PassThrough();
  const stored = new PassThrough();
  const all = [original, stored];
  // The MIME scanner is fed in step with the blob store, synchronously (it does no I/O).
  const scanner = mimeTreeScanner();
  // A reader's failure is reported through its own promise; these only keep an 'error' event from
  // going unhandled when a stream is destroyed after its reader has stopped listening.
  for (const s of all) s.on('error', () => {});
  let failure: { err: unknown } | null = null;
  let onFailure = () => {};
  const failed = new Promise<void>((resolve) => (onFailure = resolve));
  const fail = (err: unknown) => {
    if (failure) return;
    failure = { err };
    for (const s of all) s.destroy(err instanceof Error ? err : new Error(String(err)));
    onFailure();
  };
  const guard = <T>(p: Promise<T>) =>
    p.catch((err: unknown) => {
      fail(err);
      throw err;
    });
  const ours = new Set([ctx.config.hostname.toLowerCase(), ctx.config.mxHost.toLowerCase()]);
  const scan = (chunk: Buffer) => {
    try {
      scanner.push(chunk);
    } catch (err) {
      fail(err);
    }
  };
  const readers = Promise.allSettled([
    guard(storage.mail.blobs.put(stored)),
    // A failure inside mailauth must not refuse the mail on every retry: the message is stored with
    // "none" as its result (RFC 8601 §2.2) and the rest of the stream read on to nowhere.
    authenticateMessage(original, {
      ip: session.remoteAddress,
      helo: session.hostNameAppearsAs || '',
      sender: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
      authservId: ctx.config.hostname,
      resolver: mailauthResolver(ctx.resolver),
    }).catch((err: unknown): Verdict => {
      if (!failure) ctx.log.warn({ err, session: session.id }, 'inbound: authentication failed; stored as none');
      original.resume();
      return unauthenticated(ctx.config.hostname);
    }),
  ]);

  let head: Buffer[] | null = [];
  let headBytes = 0;
  let raw: Buffer[] | null = keepRaw ? [] : null;
  let rawBytes = 0;
  // Where the body goes once the header is read: mailauth reads the body only to hash it for a DKIM or
  // ARC signature; a message without one gets its header alone (an empty body), the same verdict.
  let bodyReaders = all;
  // Why mailauth was given nothing (mail/auth-header-budget.ts), or null when it read the message.
  let unchecked: string | null = null;
  const pushHeader = async (block: Buffer) => {
    const end = headerEnd(block);
    const header = end < 0 ? block : block.subarray(0, end);
    const filtered = removeOurAuthResults(header, ours).header;
    unchecked = authHeaderProblem(header);
    if (unchecked !== null) {
      original.end();
      bodyReaders = [stored];
    } else if (carriesSignatures(header)) await write([original], block, failed);
    else {
      await write([original], header, failed);
      original.end();
      bodyReaders = [stored];
    }
    const kept = filtered === header ? block : Buffer.concat([filtered, block.subarray(end)]);
    scan(kept);
    await write([stored], kept, failed);
  };
  for await (const c of stream as AsyncIterable<Buffer>) {
    if (failure || stream.sizeExceeded) continue; // read to the end, keep nothing
    if (raw) {
      rawBytes += c.length;
      if (rawBytes > MAX_REPORT_BYTES) raw = null;
      else raw.push(c);
    }
    if (!head) {
      scan(c);
      await write(bodyReaders, c, failed);
      continue;
    }
    head.push(c);
    headBytes += c.length;
    const block: Buffer = head.length === 1 ? c : Buffer.concat(head);
    head = [block];
    if (headerEnd(block) >= 0) {
      head = null;
      await pushHeader(block);
    } else if (headBytes > MAX_HEADER_BYTES)
      fail(MESSAGE_TOO_BIG.with(`Message header too big (at most ${MAX_HEADER_BYTES} bytes)`));
  }
  // A message that is all header (no blank line): the whole of it is the header block.
  if (head && !failure && !stream.sizeExceeded) await pushHeader(head.length ? Buffer.concat(head) : Buffer.alloc(0));
  if (stream.sizeExceeded) fail(tooBig(maxBytes));
  if (!failure) for (const s of all) if (!s.writableEnded) s.end();

  const [put, verdict] = await readers;
  let tree: MimeTree | null = null;
  if (!failure) {
    try {
      tree = scanner.finish();
    } catch (err) {
      fail(err);
    }
  }
  if (failure) {
    if (put.status === 'fulfilled') await storage.mail.blobs.release(put.value.address).catch(() => {});
    throw (failure as { err: unknown }).err;
  }
  if (put.status !== 'fulfilled' || verdict.status !== 'fulfilled' || !tree)
    throw new Error('inbound: a reader failed without failing the pipeline');
  return {
    blob: put.value,
    tree,
    verdict: unchecked === null ? verdict.value : notAuthenticated(ctx.config.hostname, unchecked),
    raw: raw ? Buffer.concat(raw) : null,
  };
}

/** DSNs and ARF reports to the VERP return paths of sent messages (docs/decisions.md #10). */
async function recordReports(raw: Buffer, reports: readonly ReportRecipient[], { ctx, storage }: ReceiveDeps) {
  const { log, clock } = ctx;
  // Parsed once, however many of our messages it is addressed about (one per VERP recipient).
  const report = await parseReport(raw);
  log.debug({ bytes: raw.length, recipients: reports.length }, 'report parsed');
  for (const { message: m } of reports) {
    // A message to several (docs/api.md §6): the report is about the recipients it names; when it names none
    // and only one was sent, that one. A complaint naming none is recorded for the message, suppressing no one.
    let named: (string | null)[] = [m.to];
    if (m.recipients) {
      const found = reportRecipients(report, m.recipients);
      named = found.length ? found : m.recipients.length === 1 ? m.recipients : [null];
    }
    for (const rcpt of named) await recordOne(m, rcpt);
  }

  async function recordOne(m: ReportRecipient['message'], rcpt: string | null) {
    const outcome = reportOutcome(report, rcpt ?? m.to);
    if (outcome.kind === 'ignored' || (rcpt === null && outcome.kind !== 'complained')) {
      const why = outcome.kind === 'ignored' ? outcome.why : 'names none of the recipients of a message to several';
      log.info({ messageId: m.id, why }, 'report received and ignored');
      return;
    }
    const reason =
      rcpt === null
        ? null
        : outcome.kind === 'complained'
          ? 'complaint'
          : outcome.kind === 'bounced' && outcome.suppress
            ? 'hard_bounce'
            : null;
    const recorded = await recordReport(storage.db, {
      messageId: m.id,
      ...(m.recipients && rcpt !== null ? { recipient: rcpt } : {}),
      projectId: m.projectId,
      type: outcome.kind,
      detail: rcpt === null ? outcome.detail : { recipient: rcpt, ...outcome.detail },
      at: new Date(clock.now()),
      suppress:
        reason && rcpt !== null
          ? {
              address: rcpt,
              reason,
              detail: String(
                outcome.detail.diagnostic ?? outcome.detail.message ?? outcome.detail.feedbackType ?? outcome.kind,
              ),
            }
          : undefined,
    });
    if (recorded) {
      log.info({ messageId: m.id, type: outcome.kind }, 'asynchronous report recorded');
      // Its event's webhook attempts, if any endpoint takes it: the dispatcher of this process looks now (#88).
      storage.webhooksDue.wake();
    } else log.info({ messageId: m.id, type: outcome.kind }, 'a second final report of the message, ignored');
  }
}
