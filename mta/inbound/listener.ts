// The MX listener on SVC_SMTP_PORT (smtp-server). Today it takes mail for the VERP return paths of
// sent messages only (docs/decisions.md #10): DSNs and ARF reports, whose effect is recorded before the
// 250 (docs/decisions.md #15). Receiving into inboxes joins it here with its issue; every other
// recipient is refused at RCPT time, so nothing is accepted that would then be lost.
import { SMTPServer } from 'smtp-server';
import type { Readable } from 'node:stream';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import { recordReport, reportedMessage, type ReportedMessage } from '../../storage/pg/reports.js';
import { decodeReturnPath } from '../../mail/verp.js';
import { MAILBOX_UNKNOWN, MESSAGE_TOO_BIG, smtpHooks } from '../../mail/smtp-reply.js';
import { readReport } from './reports.js';

const MAX_REPORT_BYTES = 10 * 1024 * 1024;

async function lookup(storage: Storage, address: string): Promise<ReportedMessage | null> {
  const verp = decodeReturnPath(address);
  if (!verp) return null;
  const m = await reportedMessage(storage.db, verp.messageId);
  // The whole address must be the one we sent from: the id alone at another domain names nothing.
  return m && m.returnPath.toLowerCase() === address.toLowerCase() ? m : null;
}

async function readAll(stream: Readable): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  for await (const c of stream) chunks.push(c as Buffer);
  return (stream as Readable & { sizeExceeded?: boolean }).sizeExceeded ? null : Buffer.concat(chunks);
}

export async function listenMx(ctx: Context, storage: Storage): Promise<{ port: number; close(): Promise<void> }> {
  const { config, log, clock } = ctx;
  const server = new SMTPServer({
    name: config.hostname,
    banner: 'svc-mail ESMTP',
    size: MAX_REPORT_BYTES,
    authOptional: true,
    disabledCommands: ['AUTH'],
    // Reverse lookups of every client would cost a DNS round trip per connection and decide nothing here.
    disableReverseLookup: true,
    logger: false,
    // Every refusal below is an SmtpReply; anything else thrown answers 451 4.3.0 (docs/conventions.md #3).
    ...smtpHooks(
      {
        async onRcptTo(address) {
          if (!(await lookup(storage, address.address))) throw MAILBOX_UNKNOWN;
        },
        async onData(stream, session) {
          const raw = await readAll(stream);
          if (!raw) throw MESSAGE_TOO_BIG.with(`Message too big (at most ${MAX_REPORT_BYTES} bytes)`);
          for (const rcpt of session.envelope.rcptTo) {
            const m = await lookup(storage, rcpt.address);
            if (!m) continue;
            const outcome = await readReport(raw, m.to);
            if (outcome.kind === 'ignored') {
              log.info({ messageId: m.id, why: outcome.why }, 'report received and ignored');
              continue;
            }
            const reason =
              outcome.kind === 'complained'
                ? 'complaint'
                : outcome.kind === 'bounced' && outcome.suppress
                  ? 'hard_bounce'
                  : null;
            await recordReport(storage.db, {
              messageId: m.id,
              projectId: m.projectId,
              type: outcome.kind,
              detail: outcome.detail,
              at: new Date(clock.now()),
              suppress: reason
                ? {
                    address: m.to,
                    reason,
                    detail: String(
                      outcome.detail.diagnostic ??
                        outcome.detail.message ??
                        outcome.detail.feedbackType ??
                        outcome.kind,
                    ),
                  }
                : undefined,
            });
            log.info({ messageId: m.id, type: outcome.kind }, 'asynchronous report recorded');
          }
        },
      },
      log,
    ),
  });
  server.on('error', (err: Error) => log.warn({ err }, 'MX listener connection error'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.smtpPort, config.bindHost, () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
