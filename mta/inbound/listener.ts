// The MX listener on SVC_SMTP_PORT (smtp-server): mail for the live inboxes of verified inbound
// capabilities, and DSNs and ARF reports to the VERP return paths of sent messages (docs/decisions.md #10).
// This file is the wiring; the RCPT policy is mta/inbound/recipients.ts, DATA mta/inbound/deliver.ts.
// Every recipient we would not keep is refused at RCPT time, and nothing is acknowledged before it is
// durable (docs/decisions.md #15, #19).
import { SMTPServer } from 'smtp-server';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import { smtpHooks } from '../../mail/smtp-reply.js';
import { decideRecipient, remember } from './recipients.js';
import { MAX_REPORT_BYTES, receiveMessage } from './deliver.js';

export async function listenMx(ctx: Context, storage: Storage): Promise<{ port: number; close(): Promise<void> }> {
  const { config, log } = ctx;
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
        async onRcptTo(address, session) {
          remember(session.envelope, await decideRecipient(storage, address.address));
        },
        async onData(stream, session) {
          await receiveMessage(stream, session, { ctx, storage, maxBytes: MAX_REPORT_BYTES });
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
