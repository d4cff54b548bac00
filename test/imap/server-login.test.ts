// The IMAP server's front door on the real service: LOGIN and AUTHENTICATE PLAIN with an inbox address
// and password, the one answer for every kind of failure, the first login's effects (docs/decisions.md
// #18), what a bad or over-long line gets, and the per-address connection cap.
import t from 'tap';
import { ImapFlow } from 'imapflow';
import { startTestService } from '../helpers/service.js';
import { makeInbox, rawImap } from '../helpers/imap-inbox.js';
import { findInbox } from '../../storage/pg/inboxes.js';

const client = (port: number, user: string, pass: string) =>
  new ImapFlow({ host: '127.0.0.1', port, secure: false, auth: { user, pass }, logger: false, disableAutoIdle: true });

t.test('login: a right password logs in; wrong, unknown and deleted answer alike', async (t) => {
  const svc = await startTestService(t);
  const { storage } = svc.running;
  const a = await makeInbox(storage);
  const gone = await makeInbox(storage, { localpart: 'gone' });
  await storage.db.query('UPDATE inboxes SET deleted_at = now() WHERE id = $1', [gone.inbox.id]);

  const before = await storage.db.query<{ s: string | null }>(
    'SELECT initial_password_sealed AS s FROM inboxes WHERE id = $1',
    [a.inbox.id],
  );
  t.ok(before[0]?.s, 'the initial password is kept until the first login');
  t.equal((await findInbox(storage.db, a.inbox.id))?.billingStartedAt, null, 'billing not started');

  const c = client(svc.imapPort, a.address.toUpperCase(), a.password);
  await c.connect();
  t.ok(c.authenticated, 'logged in (the address in any case)');
  await c.logout();
  const after = await storage.db.query<{ s: string | null }>(
    'SELECT initial_password_sealed AS s FROM inboxes WHERE id = $1',
    [a.inbox.id],
  );
  t.equal(after[0]?.s, null, 'the first login clears the initial password');
  t.ok((await findInbox(storage.db, a.inbox.id))?.billingStartedAt, 'and starts billing');

  const answers: string[] = [];
  for (const [user, pass] of [
    [a.address, 'wrong'],
    [`nobody@${a.address.split('@')[1]}`, a.password],
    [gone.address, gone.password],
    ['not-an-address', 'x'],
  ] as const) {
    const raw = await rawImap(svc.imapPort);
    await raw.until(/^\* OK/);
    raw.send(`a1 LOGIN "${user}" "${pass}"`);
    const text = await raw.until(/a1 (OK|NO|BAD)[^\r]*\r\n/);
    answers.push(/a1 [^\r]*/.exec(text)?.[0] ?? '');
    raw.send('a2 NOOP');
    await raw.until(/a2 OK/, 'the session goes on after a failed login');
    raw.close();
  }
  t.same(answers, Array(4).fill('a1 NO [AUTHENTICATIONFAILED] invalid credentials'), 'one answer for all');

  // AUTHENTICATE PLAIN, with an initial response (RFC 4959) and without (RFC 4616 after a "+ ").
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  const plain = Buffer.from(`\0${a.address}\0${a.password}`).toString('base64');
  raw.send(`p1 AUTHENTICATE PLAIN ${plain}`);
  await raw.until(/p1 OK \[CAPABILITY IMAP4rev1[^\]]*QUOTA/);
  raw.close();
  const raw2 = await rawImap(svc.imapPort);
  await raw2.until(/^\* OK/);
  raw2.send('p2 AUTHENTICATE PLAIN');
  await raw2.until(/\+ \r\n/);
  raw2.send(Buffer.from(`other\0${a.address}\0${a.password}`).toString('base64'));
  await raw2.until(/p2 NO \[AUTHORIZATIONFAILED\]/);
  raw2.send('p3 AUTHENTICATE PLAIN');
  await raw2.until(/\+ \r\n[^]*\+ \r\n/);
  raw2.send('*');
  await raw2.until(/p3 BAD AUTHENTICATE cancelled/);
  raw2.close();
});

t.test('failed logins are throttled per address; a deleted inbox ends its sessions', async (t) => {
  const svc = await startTestService(t);
  const { storage } = svc.running;
  const a = await makeInbox(storage);
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  // docs/decisions.md #24: ten failures per account, then one per 30 s.
  for (let i = 0; i < 10; i++) {
    raw.send(`f${i} LOGIN ${a.address} wrong`);
    await raw.until(new RegExp(`f${i} NO \\[AUTHENTICATIONFAILED\\]`));
  }
  raw.send(`g LOGIN ${a.address} ${a.password}`);
  await raw.until(/g NO \[UNAVAILABLE\] too many failed logins/, 'even the right password waits');
  raw.close();

  const b = await makeInbox(storage, { localpart: 'bob' });
  const c = client(svc.imapPort, b.address, b.password);
  await c.connect();
  await c.noop();
  await storage.db.query('UPDATE inboxes SET deleted_at = now() WHERE id = $1', [b.inbox.id]);
  const closed = new Promise<void>((resolve) => c.on('close', () => resolve()));
  await t.rejects(
    c.noop().then(() => c.list()),
    'the next command meets BYE',
  );
  await closed;
});

t.test('bad input: garbage is BAD and the session goes on; an over-long line is BAD', async (t) => {
  const svc = await startTestService(t);
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK \[CAPABILITY IMAP4rev1 [^\]]*AUTH=PLAIN/);
  raw.send('x1 FROBNICATE now');
  await raw.until(/x1 BAD unknown command FROBNICATE/);
  raw.send(Buffer.from([0xff, 0xfe, 0x00, 0x41, 0x0d, 0x0a]));
  await raw.until(/\* BAD|BAD [^\r]*\r\n[^]*$/);
  raw.send(`x2 LOGIN ${'a'.repeat(20_000)} b`);
  await raw.until(/x2 BAD command line longer than 8192 octets/);
  raw.send('x3 SELECT INBOX');
  await raw.until(/x3 BAD SELECT is not valid in the not-authenticated state/);
  // An anonymous client may not make the server hold an APPEND-sized literal.
  raw.send('x4 APPEND INBOX {100000}');
  await raw.until(/x4 NO \[TOOBIG\]/);
  raw.send('x5 NOOP');
  await raw.until(/x5 OK NOOP completed/);
  raw.send('x6 LOGOUT');
  await raw.until(/\* BYE[^]*x6 OK LOGOUT completed/);
  t.pass('every bad command answered and the session went on');
  raw.close();
});

t.test('connections over the per-address cap are refused with BYE', async (t) => {
  const svc = await startTestService(t, { imap: { maxConnectionsPerIp: 3 } });
  const conns = [];
  for (let i = 0; i < 3; i++) {
    const c = await rawImap(svc.imapPort);
    await c.until(/^\* OK/);
    conns.push(c);
  }
  for (let i = 0; i < 2; i++) {
    const over = await rawImap(svc.imapPort);
    await over.until(/^\* BYE too many connections/);
    await t.resolves(new Promise<void>((r) => (over.closed() ? r() : over.socket.once('close', () => r()))), 'closed');
  }
  conns[0]?.close();
  const { waitFor } = await import('../helpers/wait-for.js');
  await waitFor(async () => {
    const again = await rawImap(svc.imapPort);
    const text = await again.until(/^\* (OK|BYE)/);
    again.close();
    return text.startsWith('* OK');
  });
  for (const c of conns) c.close();
});

t.test("Python's imaplib logs in, lists and appends", async (t) => {
  const svc = await startTestService(t);
  const a = await makeInbox(svc.running.storage);
  const { spawn } = await import('node:child_process');
  const script = `
import imaplib, sys
m = imaplib.IMAP4('127.0.0.1', int(sys.argv[1]))
m.login(sys.argv[2], sys.argv[3])
typ, data = m.list()
print('LIST', typ, len(data))
for d in data: print(d.decode())
typ, data = m.append('Sent', '(\\\\Seen)', None, b'Subject: from python\\r\\n\\r\\nhello\\r\\n')
print('APPEND', typ, data[0].decode())
typ, data = m.select('Sent')
print('SELECT', typ, data[0].decode())
m.logout()
`;
  const py = spawn('python3', ['-c', script, String(svc.imapPort), a.address, a.password]);
  let out = '';
  let err = '';
  py.stdout.on('data', (d) => (out += d));
  py.stderr.on('data', (d) => (err += d));
  const code = await new Promise((r) => py.on('close', r));
  t.equal(code, 0, err);
  t.match(out, /LIST OK 5/);
  t.match(out, /\(\\HasNoChildren \\Sent\) "\/" "?Sent"?/);
  t.match(out, /APPEND OK \[APPENDUID \d+ 1\] APPEND completed/);
  t.match(out, /SELECT OK 1/);
});
