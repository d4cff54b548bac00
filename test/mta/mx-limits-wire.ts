// A raw SMTP client for the MX limit and smuggling tests: bytes written exactly as given (no client
// library normalises line endings for us), replies read one complete reply at a time, STARTTLS by hand.
import net from 'node:net';
import tls from 'node:tls';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import path from 'node:path';
import type { TestService } from '../helpers/service.js';
import type { Sender } from '../helpers/sender.js';

export interface Reply {
  code: number;
  /** The reply's lines without their codes ("250-SIZE 1000" → "SIZE 1000"). */
  lines: string[];
  text: string;
}

export interface Wire {
  socket: net.Socket | tls.TLSSocket;
  /** The next complete reply (RFC 5321 §4.2: the last line has a space after the code). */
  reply(timeoutMs?: number): Promise<Reply>;
  /** Writes the bytes as they are. */
  write(raw: string | Buffer): void;
  /** Writes `line` + CRLF and reads the reply. */
  command(line: string): Promise<Reply>;
  /** STARTTLS, then a TLS handshake on the same socket (certificates not checked: self-signed in tests). */
  starttls(servername?: string): Promise<tls.TLSSocket>;
  /** Resolves once the server has closed the connection. */
  closed: Promise<void>;
  close(): void;
}

function attach(socket: net.Socket | tls.TLSSocket, closed: Promise<void>): Wire {
  let buffer = '';
  let waiting: (() => void) | null = null;
  const onData = (d: Buffer) => {
    buffer += d.toString('latin1');
    waiting?.();
  };
  socket.on('data', onData);
  const take = (): Reply | null => {
    const lines: string[] = [];
    let rest = buffer;
    for (;;) {
      const nl = rest.indexOf('\r\n');
      if (nl < 0) return null;
      const line = rest.slice(0, nl);
      rest = rest.slice(nl + 2);
      lines.push(line);
      if (/^\d{3}(?: |$)/.test(line)) {
        buffer = rest;
        return { code: Number(line.slice(0, 3)), lines: lines.map((l) => l.slice(4)), text: lines.join('\n') };
      }
    }
  };
  const wire: Wire = {
    socket,
    closed,
    async reply(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const r = take();
        if (r) return r;
        if (socket.destroyed || socket.readableEnded) throw new Error(`connection closed; unread: ${buffer}`);
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`no complete reply within ${timeoutMs} ms; unread: ${JSON.stringify(buffer)}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, left);
          const done = () => {
            clearTimeout(timer);
            socket.off('close', done);
            waiting = null;
            resolve();
          };
          waiting = done;
          socket.once('close', done);
        });
      }
    },
    write: (raw) => void socket.write(typeof raw === 'string' ? Buffer.from(raw, 'latin1') : raw),
    async command(line) {
      wire.write(`${line}\r\n`);
      return wire.reply();
    },
    async starttls(servername) {
      const r = await wire.command('STARTTLS');
      if (r.code !== 220) throw new Error(`STARTTLS answered ${r.text}`);
      socket.off('data', onData);
      const secure = tls.connect({ socket, rejectUnauthorized: false, ...(servername ? { servername } : {}) });
      await new Promise<void>((resolve, reject) => {
        secure.once('secureConnect', resolve);
        secure.once('error', reject);
      });
      Object.assign(wire, attach(secure, closed));
      return secure;
    },
    close: () => socket.destroy(),
  };
  return wire;
}

/** Connects (from `localAddress` when given: 127.0.0.2 is another client on loopback) and reads the greeting. */
export async function connect(port: number, localAddress?: string): Promise<{ wire: Wire; greeting: Reply }> {
  const socket = net.connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
  socket.on('error', () => {});
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', resolve);
    socket.once('error', reject);
  });
  const wire = attach(socket, closed);
  return { wire, greeting: await wire.reply() };
}

/** Sends one message through the API and returns its VERP return path (no need to wait for delivery). */
export async function verpAddress(svc: TestService, s: Sender, to = 'rcpt@dest.test'): Promise<string> {
  const { providerMessageId: id } = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to,
    subject: 'Your receipt',
    text: 'Thanks',
  });
  const rows = await svc.running.storage.db.query<{ returnPath: string }>(
    'SELECT return_path AS "returnPath" FROM messages WHERE id = $1',
    [id],
  );
  return rows[0]!.returnPath;
}

/** A self-signed certificate and key (P-256) for `cn`, written into `dir` as <name>.crt and <name>.key. */
export async function selfSigned(dir: string, name: string, cn: string): Promise<{ cert: string; key: string }> {
  const cert = path.join(dir, `${name}.crt`);
  const key = path.join(dir, `${name}.key`);
  await promisify(execFile)('openssl', [
    'req',
    '-x509',
    '-newkey',
    'ec',
    '-pkeyopt',
    'ec_paramgen_curve:P-256',
    '-nodes',
    '-keyout',
    key,
    '-out',
    cert,
    '-days',
    '2',
    '-subj',
    `/CN=${cn}`,
  ]);
  return { cert, key };
}

/** A DSN (RFC 3464) saying delivery to `recipient` is delayed: one `deferred` event per report recorded. */
export function delayedDsn(verp: string, recipient: string, reportingMta: string): string {
  return [
    `From: MAILER-DAEMON@${reportingMta}`,
    `To: ${verp}`,
    'Subject: Delayed Mail (still being retried)',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="D1"',
    '',
    '--D1',
    'Content-Type: text/plain',
    '',
    'Delivery has been delayed; we will try again.',
    '',
    '--D1',
    'Content-Type: message/delivery-status',
    '',
    `Reporting-MTA: dns; ${reportingMta}`,
    '',
    `Final-Recipient: rfc822; ${recipient}`,
    'Action: delayed',
    'Status: 4.4.1',
    '',
    '--D1--',
    '',
  ].join('\r\n');
}
