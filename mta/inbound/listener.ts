// The MX listener on SVC_SMTP_PORT (smtp-server): mail for the live inboxes of verified inbound
// capabilities, and DSNs and ARF reports to the VERP return paths of sent messages (docs/decisions.md #10).
// This file is the wiring; the RCPT policy is mta/inbound/recipients.ts, DATA mta/inbound/deliver.ts.
// Every recipient we would not keep is refused at RCPT time, and nothing is acknowledged before it is
// durable (docs/decisions.md #15, #19).
import { SMTPServer } from 'smtp-server';
import type { Context } from '../../config/context.js';
import type { TlsCertificates } from '../../config/tls.js';
import type { Storage } from '../../storage/index.js';
import { smtpHooks } from '../../mail/smtp-reply.js';
import { decideRecipient, remember } from './recipients.js';
import { receiveMessage } from './deliver.js';
import { capRecipients, connectionGuard, limitOptions } from './limits.js';

export interface MxOptions {
  /** The certificate offered with STARTTLS (SVC_TLS_CERT); without one STARTTLS is neither offered nor taken. */
  tls?: TlsCertificates | null;
}

export async function listenMx(
  ctx: Context,
  storage: Storage,
  opts: MxOptions = {},
): Promise<{ port: number; connections(): number; close(): Promise<void> }> {
  const { config, log } = ctx;
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
        async onRcptTo(address, session) {
          remember(session.envelope, await decideRecipient(storage, address.address));
        },
        async onData(stream, session) {
          await receiveMessage(stream, session, { ctx, storage, maxBytes: config.maxMessageBytes });
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
    /** Open connections now (svc_mx_connections). */
    connections: () => server.connections.size,
    close: () =>
      new Promise<void>((resolve) => {
        unsubscribe?.();
        server.close(() => resolve());
      }),
  };
}
