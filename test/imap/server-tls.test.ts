// The IMAP listener with a certificate (SVC_TLS_CERT/SVC_TLS_KEY): STARTTLS (RFC 3501 §6.2.1), LOGINDISABLED
// and the refusal of a password in the clear (§6.2.3) for clients that are not trusted with one, the
// pipelined-command injection after STARTTLS (RFC 2595 §3.1), and the implicit-TLS listener of
// SVC_IMAPS_PORT (RFC 8314). One service; `remote` makes loopback clients count as remote ones.
import t from 'tap';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { ImapFlow } from 'imapflow';
import { startTestService } from '../helpers/service.js';
import { makeInbox, rawImap } from '../helpers/imap-inbox.js';
import { waitFor } from '../helpers/wait-for.js';
import { selfSigned } from '../mta/mx-limits-wire.js';
import { isLoopback } from '../../imap/server.js';

const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-imap-tls-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
const pair = await selfSigned(dir, 'imap', 'imap.test');
let remote = true;
const svc = await startTestService(t, {
  env: { SVC_TLS_CERT: pair.cert, SVC_TLS_KEY: pair.key, SVC_IMAPS_PORT: '0' },
  imap: { plaintextAuthFrom: (ip) => !remote && isLoopback(ip) },
});
const a = await makeInbox(svc.running.storage);
const capsOf = (text: string) => /CAPABILITY ([^\]\r]*)/.exec(text)?.[1]?.split(' ') ?? [];

/** Reads from a TLS socket until the transcript matches. */
function tlsTranscript(socket: tls.TLSSocket) {
  let buf = '';
  socket.on('data', (d: Buffer) => (buf += d.toString('latin1')));
  return {
    send: (line: string) => void socket.write(`${line}\r\n`),
    until: (re: RegExp) => waitFor(() => (re.test(buf) ? buf : null), { what: String(re) }),
    text: () => buf,
  };
}

t.test('a client not trusted with a cleartext password: STARTTLS and LOGINDISABLED, LOGIN refused', async (t) => {
  remote = true;
  const raw = await rawImap(svc.imapPort);
  const greeting = await raw.until(/^\* OK[^\r]*\r\n/);
  const caps = capsOf(greeting);
  t.ok(caps.includes('STARTTLS'), 'STARTTLS offered');
  t.ok(caps.includes('LOGINDISABLED'), 'LOGINDISABLED advertised');
  t.notOk(caps.includes('AUTH=PLAIN'), 'no AUTH=PLAIN before TLS');
  raw.send(`l1 LOGIN "${a.address}" "${a.password}"`);
  await raw.until(/l1 NO \[PRIVACYREQUIRED\]/);
  raw.send(`l2 AUTHENTICATE PLAIN ${Buffer.from(`\0${a.address}\0${a.password}`).toString('base64')}`);
  await raw.until(/l2 (NO|BAD)/);
  t.notMatch(raw.text(), /l2 OK/, 'AUTHENTICATE refused too');
  raw.close();
});

t.test('STARTTLS: commands pipelined behind it are dropped; after the handshake LOGIN works', async (t) => {
  remote = true;
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  // The injection of RFC 2595 §3.1: bytes sent in the clear after STARTTLS must not run inside TLS.
  raw.send(Buffer.from(`s1 STARTTLS\r\ns2 LOGIN "${a.address}" "${a.password}"\r\ns3 NOOP\r\n`));
  await raw.until(/s1 OK[^\r]*\r\n/);
  const secured = tls.connect({ socket: raw.socket, servername: 'imap.test', rejectUnauthorized: false });
  await new Promise<void>((resolve, reject) => {
    secured.once('secureConnect', () => resolve());
    secured.once('error', reject);
  });
  const s = tlsTranscript(secured);
  s.send('c1 CAPABILITY');
  const caps = capsOf(await s.until(/c1 OK[^\r]*\r\n/));
  t.ok(caps.includes('AUTH=PLAIN'), 'AUTH=PLAIN inside TLS');
  t.notOk(caps.includes('STARTTLS') || caps.includes('LOGINDISABLED'), 'neither STARTTLS nor LOGINDISABLED');
  t.notMatch(s.text() + raw.text(), /\bs[23] /, 'the pipelined LOGIN and NOOP were never answered');
  s.send(`c2 LOGIN "${a.address}" "${a.password}"`);
  await s.until(/c2 OK/);
  s.send('c3 STARTTLS');
  await s.until(/c3 BAD/);
  secured.destroy();
});

t.test('imapflow over STARTTLS and over the implicit-TLS port', async (t) => {
  remote = true;
  t.ok(svc.running.ports.imaps, 'SVC_IMAPS_PORT listens');
  for (const [port, secure] of [
    [svc.imapPort, false],
    [svc.running.ports.imaps!, true],
  ] as const) {
    const c = new ImapFlow({
      host: '127.0.0.1',
      port,
      secure,
      tls: { rejectUnauthorized: false },
      auth: { user: a.address, pass: a.password },
      logger: false,
      disableAutoIdle: true,
    });
    await c.connect();
    t.ok(c.authenticated, secure ? 'implicit TLS' : 'STARTTLS');
    t.ok(c.secureConnection || (c as unknown as { _socket?: { encrypted?: boolean } })._socket?.encrypted, 'encrypted');
    await c.logout();
  }
  // A handshake that fails costs no session: the plain listener still answers.
  const raw = await rawImap(svc.running.ports.imaps!);
  raw.send('x1 CAPABILITY');
  await waitFor(() => (raw.closed() ? true : null), { what: 'a cleartext client on the TLS port is closed' });
  t.notMatch(raw.text(), /^\* OK/, 'no greeting in the clear');
});

t.test('a loopback client may still log in in the clear (tests, a local proxy)', async (t) => {
  remote = false;
  const raw = await rawImap(svc.imapPort);
  const caps = capsOf(await raw.until(/^\* OK[^\r]*\r\n/));
  t.ok(caps.includes('STARTTLS') && caps.includes('AUTH=PLAIN'), 'STARTTLS offered, AUTH=PLAIN allowed');
  t.notOk(caps.includes('LOGINDISABLED'));
  raw.send(`l1 LOGIN "${a.address}" "${a.password}"`);
  await raw.until(/l1 OK/);
  raw.close();
});
