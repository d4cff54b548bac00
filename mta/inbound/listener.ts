// The MX listener on SVC_SMTP_PORT (smtp-server). Today it takes mail for the VERP return paths of
// sent messages only (gaps-filled.md #10): DSNs and ARF reports, whose effect is recorded before the
// 250 (gaps-filled.md #15). Receiving into inboxes joins it here with its issue; every other
// recipient is refused at RCPT time, so nothing is accepted that would then be lost.
import { SMTPServer, type SMTPServerAddress, type SMTPServerSession } from 'smtp-server';
import type { Readable } from 'node:stream';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import { recordReport, reportedMessage, type ReportedMessage } from '../../storage/pg/reports.js';
import { decodeReturnPath } from '../../mail/verp.js';
import { readReport } from './reports.js';

const MAX_REPORT_BYTES = 10 * 1024 * 1024;

const smtpError = (code: number, message: string) => Object.assign(new Error(message), { responseCode: code });

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
    async onRcptTo(address: SMTPServerAddress, _session: SMTPServerSession, cb: (err?: Error | null) => void) {
      try {
        if (await lookup(storage, address.address)) return cb();
        cb(smtpError(550, '5.1.1 No such mailbox here'));
      } catch (err) {
        log.error({ err }, 'MX recipient check failed');
        cb(smtpError(451, '4.3.0 Temporary failure, try again later'));
      }
    },
    async onData(stream: Readable, session: SMTPServerSession, cb: (err?: Error | null) => void) {
      try {
        const raw = await readAll(stream);
        if (!raw) return cb(smtpError(552, `5.3.4 Message too big (at most ${MAX_REPORT_BYTES} bytes)`));
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
                    outcome.detail.diagnostic ?? outcome.detail.message ?? outcome.detail.feedbackType ?? outcome.kind,
                  ),
                }
              : undefined,
          });
          log.info({ messageId: m.id, type: outcome.kind }, 'asynchronous report recorded');
        }
        cb();
      } catch (err) {
        log.error({ err }, 'processing a received report failed');
        cb(smtpError(451, '4.3.0 Temporary failure, try again later'));
      }
    },
  });
  server.on('error', (err: Error) => log.warn({ err }, 'MX listener connection error'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.smtpPort, config.bindHost, () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;
  return { port, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
