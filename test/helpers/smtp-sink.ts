// A receiving SMTP server on 127.0.0.1 (smtp-server, the same library real Node MTAs use) that answers
// each recipient as the test says (250, a 4xx or a 5xx), offers STARTTLS with a self-signed certificate,
// and records every message it accepted with its session facts.
//
//   const sink = await startSmtpSink(t, {
//     answer: (rcpt) => (rcpt.startsWith('gone@') ? { code: 550, message: '5.1.1 No such user' } : null),
//   });
//   svc = await startTestService(t, { env: { SVC_OUTBOUND_PORT: String(sink.port) }, mta: true });
import { SMTPServer, type SMTPServerSession } from 'smtp-server';
import { waitFor } from './wait-for.js';

export interface Refusal {
  code: number;
  /** The reply text after the code, e.g. '5.1.1 No such user'. */
  message: string;
}

export interface Received {
  mailFrom: string;
  rcptTo: string[];
  raw: Buffer;
  secure: boolean;
  remoteAddress: string;
  clientHostname: string;
  /** The EHLO name the client gave. */
  helo: string;
  sessionId: string;
}

export interface SinkOptions {
  /** Per recipient: null accepts, a Refusal refuses it at RCPT TO. */
  answer?: (rcpt: string) => Refusal | null;
  /** Offer STARTTLS (default true). */
  tls?: boolean;
  /** The SIZE limit announced in EHLO (RFC 1870), in bytes; default 50 MB. */
  size?: number;
  /** PEM certificate and key STARTTLS offers; default smtp-server's built-in self-signed one. */
  cert?: Buffer | string;
  key?: Buffer | string;
}

export interface SmtpSink {
  port: number;
  messages: Received[];
  /** Recipients refused, in order, with the code given. */
  refused: { rcpt: string; code: number }[];
  /** TCP connections accepted so far. */
  connections: number;
  /** Connections open now, and the most ever open at once. */
  open: number;
  maxOpen: number;
  answer: (rcpt: string) => Refusal | null;
  waitForMessages(n: number, timeoutMs?: number): Promise<Received[]>;
  close(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export async function startSmtpSink(t: Teardown, opts: SinkOptions = {}): Promise<SmtpSink> {
  const sink: SmtpSink = {
    port: 0,
    messages: [],
    refused: [],
    connections: 0,
    open: 0,
    maxOpen: 0,
    answer: opts.answer ?? (() => null),
    async waitForMessages(n, timeoutMs = 20_000) {
      await waitFor(() => sink.messages.length >= n, {
        timeoutMs,
        what: `${n} messages at the sink (have ${sink.messages.length})`,
      });
      return sink.messages;
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: opts.tls === false ? ['AUTH', 'STARTTLS'] : ['AUTH'],
    disableReverseLookup: true,
    logger: false,
    size: opts.size ?? 50 * 1024 * 1024,
    ...(opts.cert && opts.key ? { cert: opts.cert, key: opts.key } : {}),
    onConnect(_session, cb) {
      sink.connections++;
      sink.maxOpen = Math.max(sink.maxOpen, ++sink.open);
      cb();
    },
    onClose() {
      sink.open--;
    },
    onRcptTo(address, _session, cb) {
      const refusal = sink.answer(address.address);
      if (!refusal) return cb();
      sink.refused.push({ rcpt: address.address, code: refusal.code });
      const err = new Error(refusal.message) as Error & { responseCode: number };
      err.responseCode = refusal.code;
      cb(err);
    },
    onData(stream, session: SMTPServerSession, cb) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        sink.messages.push({
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
          raw: Buffer.concat(chunks),
          secure: session.secure,
          remoteAddress: session.remoteAddress,
          clientHostname: session.clientHostname,
          helo: session.hostNameAppearsAs,
          sessionId: session.id,
        });
        cb();
      });
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  sink.port = (server.server.address() as { port: number }).port;
  t.teardown(() => sink.close());
  return sink;
}
