// SMTP clients for tests of our MX listener: swaks (a real, independent client), nodemailer's
// SMTPConnection (one transaction, accepted and rejected recipients), and a bare dialogue that returns
// every final reply line.
import { execFile } from 'node:child_process';
import net from 'node:net';
import SMTPConnection from 'nodemailer/lib/smtp-connection';

export interface SwaksResult {
  /** swaks' exit code: 0 when every step was accepted. */
  code: number;
  out: string;
}

/** swaks to 127.0.0.1:port with `data` (LF or CRLF) as DATA; `to` may list several, comma-separated. */
export function swaks(
  port: number,
  o: { from: string; to: string; data: string | Buffer; helo?: string; extra?: string[] },
): Promise<SwaksResult> {
  return new Promise((resolve) => {
    const child = execFile(
      'swaks',
      [
        '--server',
        `127.0.0.1:${port}`,
        '--helo',
        o.helo ?? 'client.test',
        '--from',
        o.from,
        '--to',
        o.to,
        '--data',
        '-',
        '--timeout',
        '20',
        ...(o.extra ?? []),
      ],
      { maxBuffer: 64 * 1024 * 1024 },
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
    const data = typeof o.data === 'string' ? Buffer.from(o.data.replace(/\r?\n/g, '\r\n')) : o.data;
    child.stdin!.end(data);
  });
}

/** One transaction; resolves with nodemailer's info (accepted, rejected, response) or rejects with its error. */
export async function sendOnce(
  port: number,
  from: string,
  to: string[],
  message: Buffer,
  name = 'client.test',
): Promise<SMTPConnection.SentMessageInfo> {
  const conn = new SMTPConnection({ host: '127.0.0.1', port, ignoreTLS: true, name, socketTimeout: 30_000 });
  const closed = new Promise<void>((resolve) => conn.once('end', resolve).on('error', () => resolve()));
  // connect()'s callback comes only with the greeting: a server that dies before it (a kill -9 mid-test) ends
  // the connection with an 'error' or an 'end' instead, which must end the wait too.
  await new Promise<void>((resolve, reject) => {
    conn.once('error', reject).once('end', () => reject(new Error('connection closed before the greeting')));
    conn.connect((err) => (err ? reject(err) : resolve()));
  });
  try {
    return await new Promise((resolve, reject) =>
      conn.send({ from, to }, message, (err, info) => (err ? reject(err) : resolve(info))),
    );
  } finally {
    conn.quit();
    await closed;
  }
}

/** A bare SMTP dialogue: sends each command after the previous reply and returns every final reply line. */
export function dialogue(port: number, commands: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const replies: string[] = [];
    const queue = [...commands];
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    s.setTimeout(10_000, () => s.destroy(new Error('dialogue timed out')));
    s.on('error', reject);
    s.on('close', () => resolve(replies));
    s.on('data', (d) => {
      buf += d.toString('latin1');
      let eol;
      while ((eol = buf.indexOf('\r\n')) >= 0) {
        const line = buf.slice(0, eol);
        buf = buf.slice(eol + 2);
        if (line[3] === '-') continue; // RFC 5321 §4.2.1: continuation of a multiline reply
        replies.push(line);
        const next = queue.shift();
        if (next === undefined) s.end();
        else s.write(`${next}\r\n`);
      }
    });
  });
}
