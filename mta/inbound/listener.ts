// The MX listener on SVC_SMTP_PORT (smtp-server). Today it takes mail for the VERP return paths of
// sent messages only (gaps-filled.md #10): DSNs and ARF reports, whose effect is recorded before the
// 250 (gaps-filled.md #15). Receiving into inboxes joins it here with its issue; every other
// recipient is refused at RCPT time, so nothing is accepted that would then be lost.
import { SMTPServer } from 'smtp-server';
import type { Context } from '../../config/context.js';
import type { TlsCertificates } from '../../config/tls.js';
import type { Storage } from '../../storage/index.js';
import { recordReport, reportedMessage, type ReportedMessage } from '../../storage/pg/reports.js';
import { decodeReturnPath } from '../../mail/verp.js';
import { MAILBOX_UNKNOWN, MESSAGE_TOO_BIG, smtpHooks } from '../../mail/smtp-reply.js';
import { parseReport, reportOutcome } from './reports.js';
import { capRecipients, connectionGuard, limitOptions, readCapped } from './limits.js';

/**
 * Reports are small: a DSN carries the headers of the original, or the original itself, which RFC 3462 §2
 * lets the reporter cut. 2 MB holds the returned message of any normal send; past that it is refused (552).
 */
const MAX_REPORT_BYTES = 2 * 1024 * 1024;

async function lookup(storage: Storage, address: string): Promise<ReportedMessage | null> {
  const verp = decodeReturnPath(address);
  if (!verp) return null;
  const m = await reportedMessage(storage.db, verp.messageId);
  // The whole address must be the one we sent from: the id alone at another domain names nothing.
  return m && m.returnPath.toLowerCase() === address.toLowerCase() ? m : null;
}

export interface MxOptions {
  /** The certificate offered with STARTTLS (SVC_TLS_CERT); without one STARTTLS is neither offered nor taken. */
  tls?: TlsCertificates | null;
}

export async function listenMx(
  ctx: Context,
  storage: Storage,
  opts: MxOptions = {},
): Promise<{ port: number; close(): Promise<void> }> {
  const { config, log, clock } = ctx;
  const tls = opts.tls ?? null;
  const guard = connectionGuard(config, () => server);
  const server: SMTPServer = new SMTPServer({
    name: config.hostname,
    banner: 'svc-mail ESMTP',
    ...limitOptions(config),
    authOptional: true,
    // Without a certificate of our own STARTTLS is disabled, not just hidden: smtp-server would otherwise
    // take it with its built-in certificate, whose private key is public.
    disabledCommands: tls ? ['AUTH'] : ['AUTH', 'STARTTLS'],
    // RFC 3207 §4: offered in EHLO before TLS; the context follows the certificate on reload (below).
    ...(tls ? { hideSTARTTLS: false, key: tls.current().key, cert: tls.current().cert } : {}),
    // Reverse lookups of every client would cost a DNS round trip per connection and decide nothing here.
    disableReverseLookup: true,
    logger: false,
    // Every refusal below is an SmtpReply; anything else thrown answers 451 4.3.0 (docs/conventions.md #3).
    ...smtpHooks(
      {
        onConnect: guard.onConnect,
        async onRcptTo(address) {
          if (!(await lookup(storage, address.address))) throw MAILBOX_UNKNOWN;
        },
        async onData(stream, session) {
          const raw = await readCapped(stream, Math.min(MAX_REPORT_BYTES, config.maxMessageBytes));
          if (!raw) {
            throw MESSAGE_TOO_BIG.with(
              stream.sizeExceeded
                ? `Message too big (at most ${config.maxMessageBytes} bytes)`
                : `Report too big (at most ${MAX_REPORT_BYTES} bytes)`,
            );
          }
          const ours = [];
          for (const rcpt of session.envelope.rcptTo) {
            const m = await lookup(storage, rcpt.address);
            if (m) ours.push(m);
          }
          // Parsed once, however many of our messages it is addressed about (one per VERP recipient).
          const report = await parseReport(raw);
          log.debug({ bytes: raw.length, recipients: ours.length, session: session.id }, 'report parsed');
          for (const m of ours) {
            const outcome = reportOutcome(report, m.to);
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
    onClose: guard.onClose,
  });
  // Before the recipient policy runs (a refused recipient is not looked up).
  server.onRcptTo = capRecipients(config.mxMaxRecipients, server.onRcptTo.bind(server));
  // A reloaded certificate is used by the connections that start TLS from now on.
  const unsubscribe = tls?.onChange((c) => server.updateSecureContext({ key: c.key, cert: c.cert }));
  server.on('error', (err: Error) => log.warn({ err }, 'MX listener connection error'));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.smtpPort, config.bindHost, () => resolve());
  });
  const port = (server.server.address() as { port: number }).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        unsubscribe?.();
        server.close(() => resolve());
      }),
  };
}
