// The message-level commands on the real service (the MX listener, the mail store, the IMAP server),
// driven by imapflow, raw sockets and Python's imaplib: FETCH of ENVELOPE, BODYSTRUCTURE, BODY[] (with
// the receipt prefix for mail the MX took in), header fields and partials, \Seen set by BODY[] only;
// SEARCH by subject, from, body text, UNSEEN and UID ranges; STORE seen by a second session; UID COPY and
// UID MOVE with COPYUID; CONDSTORE's CHANGEDSINCE.
import t from 'tap';
import { execFile } from 'node:child_process';
import { ImapFlow } from 'imapflow';
import { startTestService, type TestService } from '../helpers/service.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { makeInbox, rawImap, type RawImap, type TestInbox } from '../helpers/imap-inbox.js';
import { readMailbox } from '../helpers/inbox.js';
import { swaks } from '../helpers/smtp-client.js';

const zone = await startDnsZone(t);
const svc = await startTestService(t, { env: { SVC_DNS_SERVERS: zone.hostPort }, mta: true });
const { storage } = svc.running;

const client = async (s: TestService, a: TestInbox) => {
  const c = new ImapFlow({
    host: '127.0.0.1',
    port: s.imapPort,
    secure: false,
    auth: { user: a.address, pass: a.password },
    logger: false,
    disableAutoIdle: true,
  });
  await c.connect();
  return c;
};

const crlf = (s: string) => Buffer.from(s.replace(/\r?\n/g, '\r\n'));

/** A multipart message: a text part and a base64 attachment. */
const multipart = (subject: string, from = 'Ada Lovelace <ada@sender.test>', text = 'The first words.') =>
  crlf(
    [
      `From: ${from}`,
      'To: Bob <bob@example.test>',
      `Subject: ${subject}`,
      'Date: Wed, 05 Jun 2024 12:00:00 +0000',
      `Message-ID: <${subject.replace(/\W/g, '')}@sender.test>`,
      'MIME-Version: 1.0',
      'Content-Type: multipart/mixed; boundary="b"',
      '',
      '--b',
      'Content-Type: text/plain; charset=utf-8',
      '',
      text,
      '--b',
      'Content-Type: application/pdf; name="a.pdf"',
      'Content-Disposition: attachment; filename="a.pdf"',
      'Content-Transfer-Encoding: base64',
      '',
      'JVBERi0xLjQK',
      '--b--',
      '',
    ].join('\n'),
  );

async function loggedIn(a: TestInbox, select = 'INBOX'): Promise<RawImap> {
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  raw.send(`l LOGIN ${a.address} ${a.password}`);
  raw.send(`s SELECT ${select}`);
  await raw.until(/\r\ns OK/);
  return raw;
}

/** The literal that follows `label {n}` in `text` (latin1: one character per octet). */
function literalAfter(text: string, label: string): Buffer {
  const at = text.indexOf(`${label} {`);
  if (at < 0) throw new Error(`no ${label} literal in ${text}`);
  const open = text.indexOf('{', at);
  const close = text.indexOf('}\r\n', open);
  const n = Number(text.slice(open + 1, close));
  return Buffer.from(text.slice(close + 3, close + 3 + n), 'latin1');
}

t.test('APPENDed mail: ENVELOPE, BODYSTRUCTURE, BODY[], HEADER.FIELDS, a partial; \\Seen by BODY[] only', async (t) => {
  const a = await makeInbox(storage);
  const c = await client(svc, a);
  t.teardown(() => c.close());
  const bytes = multipart('Quarterly report');
  const appended = await c.append('INBOX', bytes);
  t.ok(appended && appended.uid === 1);
  await c.mailboxOpen('INBOX');

  const m = await c.fetchOne('1', { envelope: true, bodyStructure: true, source: true, flags: true }, { uid: true });
  if (!m) throw new Error('no message');
  t.equal(m.envelope?.subject, 'Quarterly report');
  t.same(m.envelope?.from, [{ name: 'Ada Lovelace', address: 'ada@sender.test' }]);
  t.same(m.envelope?.to, [{ name: 'Bob', address: 'bob@example.test' }]);
  t.equal(m.envelope?.messageId, '<Quarterlyreport@sender.test>');
  t.equal(m.bodyStructure?.type, 'multipart/mixed');
  t.same(
    m.bodyStructure?.childNodes?.map((p) => [p.part, p.type, p.size ?? null]),
    [
      // RFC 2046 §5.1.1: the CRLF before a boundary belongs to the boundary, not to the part.
      ['1', 'text/plain', 16],
      ['2', 'application/pdf', 12],
    ],
  );
  t.equal(m.bodyStructure?.childNodes?.[1]?.disposition, 'attachment');
  t.same(m.source, bytes, 'BODY[] is the appended octets');
  t.notOk(m.flags?.has('\\Seen'), 'imapflow reads the source with BODY.PEEK[]');

  const h = await c.fetchOne('1', { headers: ['subject'] }, { uid: true });
  t.equal(h && h.headers?.toString(), 'Subject: Quarterly report\r\n\r\n', 'BODY.PEEK[HEADER.FIELDS (SUBJECT)]');
  const p = await c.fetchOne('1', { source: { start: 0, maxLength: 10 } }, { uid: true });
  t.same(p && p.source, bytes.subarray(0, 10), 'BODY.PEEK[]<0.10>');

  const raw = await loggedIn(a);
  t.teardown(() => raw.close());
  raw.send('p1 FETCH 1 (BODY.PEEK[1] FLAGS)');
  const peeked = await raw.until(/p1 OK/);
  t.match(peeked, /\* 1 FETCH \(BODY\[1\] \{16\}\r\nThe first words\. FLAGS \(\)\)\r\n/);
  raw.send('b1 FETCH 1 BODY[]');
  const read = (await raw.until(/b1 OK/)).slice(raw.text().indexOf('p1 OK'));
  t.same(literalAfter(read, 'BODY[]'), bytes, 'BODY[] over the wire, octet for octet');
  t.match(read, /\* 1 FETCH \(BODY\[\] \{\d+\}\r\n[^]*\r\n FLAGS \(\\Seen\)\)\r\nb1 OK/, 'the new FLAGS come along');
  raw.send('n1 NOOP');
  const noop = (await raw.until(/n1 OK/)).split('b1 OK')[1] ?? '';
  t.notMatch(noop, /\* 1 FETCH/, 'the FETCH already told the new flags: the sync does not repeat them');
  const after = await c.fetchOne('1', { flags: true }, { uid: true });
  t.ok(after && after.flags?.has('\\Seen'), 'BODY[] set \\Seen (RFC 3501 §6.4.5)');
});

t.test('MX mail (swaks): BODY[] is the receipt prefix and the body; RFC822.SIZE counts both', async (t) => {
  const a = await makeInbox(storage);
  const bytes = multipart('Delivered over SMTP', 'Carol <carol@sender.test>', 'Hello from the MX.');
  const r = await swaks(svc.running.ports.smtp!, { from: 'carol@sender.test', to: a.address, data: bytes });
  t.equal(r.code, 0, r.out);
  const [stored] = await readMailbox(storage, a.mailboxes.get('INBOX') as string);
  if (!stored) throw new Error('not delivered');
  t.ok(stored.prefix.length > 0, 'the MX wrote a receipt prefix');
  const c = await client(svc, a);
  t.teardown(() => c.close());
  await c.mailboxOpen('INBOX');
  const m = await c.fetchOne('1', { source: true, size: true, envelope: true, bodyStructure: true }, { uid: true });
  if (!m) throw new Error('no message');
  t.same(m.source, stored.full, 'BODY[] = prefix + stored body');
  t.match(m.source?.toString('latin1'), /^Return-Path: <carol@sender\.test>\r\nReceived: from /);
  t.same(m.source?.subarray(stored.prefix.length), stored.body);
  t.equal(m.size, stored.full.length);
  t.equal(m.envelope?.subject, 'Delivered over SMTP');
  t.equal(m.bodyStructure?.childNodes?.[0]?.type, 'text/plain');

  const raw = await loggedIn(a);
  t.teardown(() => raw.close());
  // Sections past the top-level header move by the prefix length; the header takes the prefix in.
  raw.send('x1 FETCH 1 (BODY.PEEK[1] BODY.PEEK[HEADER.FIELDS (SUBJECT RETURN-PATH)] BODY.PEEK[TEXT]<0.4>)');
  const got = await raw.until(/x1 OK/);
  t.match(got, /BODY\[1\] \{18\}\r\nHello from the MX\. /);
  t.match(got, / \{66\}\r\nReturn-Path: <carol@sender\.test>\r\nSubject: Delivered over SMTP\r\n\r\n /);
  t.match(got, /BODY\[TEXT\]<0> \{4\}\r\n--b\r\)\r\n/, 'TEXT starts after the blank line, past the prefix');
  raw.send('x2 SEARCH HEADER Return-Path carol BODY "from the MX"');
  await raw.until(/\* SEARCH 1\r\nx2 OK/);
});

t.test('SEARCH: SUBJECT, FROM, BODY, UNSEEN, UID ranges', async (t) => {
  const a = await makeInbox(storage);
  const c = await client(svc, a);
  t.teardown(() => c.close());
  await c.append('INBOX', multipart('Invoice 7', 'Ada <ada@sender.test>', 'Please pay the invoice.'), ['\\Seen']);
  await c.append('INBOX', multipart('Lunch', 'Grace <grace@navy.test>', 'Tacos on Thursday?'));
  await c.append('INBOX', multipart('Invoice 8', 'Grace <grace@navy.test>', 'A second reminder.'));
  await c.mailboxOpen('INBOX');
  t.same(await c.search({ subject: 'invoice' }, { uid: true }), [1, 3]);
  t.same(await c.search({ from: 'grace@navy' }, { uid: true }), [2, 3]);
  t.same(await c.search({ body: 'tacos' }, { uid: true }), [2]);
  t.same(await c.search({ seen: false }, { uid: true }), [2, 3]);
  t.same(await c.search({ uid: '2:*' }, { uid: true }), [2, 3]);
  t.same(await c.search({ uid: '1,3', subject: 'invoice', seen: false }, { uid: true }), [3]);
  t.same(await c.search({ or: [{ body: 'reminder' }, { from: 'ada' }] }), [1, 3], 'sequence numbers');
  const raw = await loggedIn(a);
  t.teardown(() => raw.close());
  raw.send('u1 UID SEARCH UID 2:3 NOT SUBJECT lunch');
  await raw.until(/\* SEARCH 3\r\nu1 OK/);
  raw.send('u2 SEARCH CHARSET UTF-8 TEXT "second reminder"');
  await raw.until(/\* SEARCH 3\r\nu2 OK/);
  // A subject in encoded words (RFC 2047) is tested by decoding it; plain ones are decided by the store alone.
  // Both kinds in one answer, in order.
  await c.append('INBOX', multipart('=?UTF-8?Q?Invoice_9_=E2=82=AC?=', 'Ada <ada@sender.test>', 'Euro.'));
  await c.append('INBOX', multipart('Invoices, all of them', 'Ada <ada@sender.test>', 'List.'));
  raw.send('n1 NOOP'); // the session learns of the two new messages first (RFC 3501 §7.3.1)
  await raw.until(/\* 5 EXISTS\r\n[^]*n1 OK/);
  raw.send('u3 SEARCH HEADER Subject INVOICE');
  await raw.until(/\* SEARCH 1 3 4 5\r\nu3 OK/);
  raw.send('u4 UID SEARCH SUBJECT "voice 9"');
  await raw.until(/\* SEARCH 4\r\nu4 OK/);
  raw.send('u5 SEARCH SUBJECT "%"');
  await raw.until(/\* SEARCH\r\nu5 OK/);
  // Sets with gaps: a dense one is read as its range and filtered, a sparse one asked for UID by UID.
  raw.send('u6 UID SEARCH UID 1,4,5 SUBJECT invoice');
  await raw.until(/\* SEARCH 1 4 5\r\nu6 OK/);
  raw.send('u7 UID SEARCH UID 2,5 SUBJECT invoice');
  await raw.until(/\* SEARCH 5\r\nu7 OK/);
  raw.send('u8 UID SEARCH UID 1,5 SUBJECT invoice');
  await raw.until(/\* SEARCH 1 5\r\nu8 OK/);
  raw.send('u9 UID SEARCH UID 2,5 HEADER Subject lunch');
  await raw.until(/\* SEARCH 2\r\nu9 OK/);
});

t.test('STORE +FLAGS \\Flagged is seen by a second session at NOOP; CONDSTORE CHANGEDSINCE', async (t) => {
  const a = await makeInbox(storage);
  const c = await client(svc, a);
  t.teardown(() => c.close());
  for (const n of [1, 2, 3]) await c.append('INBOX', multipart(`m${n}`));
  const box = await c.mailboxOpen('INBOX');
  const before = box.highestModseq;
  if (before === undefined) throw new Error('no HIGHESTMODSEQ');
  const other = await loggedIn(a);
  t.teardown(() => other.close());

  t.ok(await c.messageFlagsAdd('2', ['\\Flagged'], { uid: true }));
  other.send('n1 NOOP');
  await other.until(/\* 2 FETCH \(UID 2 FLAGS \(\\Flagged\)\)\r\nn1 OK/);
  t.notMatch(other.text().split('n1 NOOP')[1] ?? '', /\* [13] FETCH/, 'only the changed message');

  // RFC 7162 §3.1.4: only what changed since the MODSEQ the client knew, each with its MODSEQ.
  const changed = [];
  for await (const m of c.fetch('1:*', { flags: true }, { uid: true, changedSince: before })) changed.push(m);
  t.same(
    changed.map((m) => [m.uid, [...(m.flags ?? [])]]),
    // c selected INBOX first after the appends: the messages are \Recent to it (RFC 3501 §2.3.2).
    [[2, ['\\Flagged', '\\Recent']]],
  );
  t.ok(changed[0]?.modseq && changed[0].modseq > before, 'MODSEQ past the old HIGHESTMODSEQ');
  other.send(`c1 UID FETCH 1:* (FLAGS) (CHANGEDSINCE ${before})`);
  const got = await other.until(/c1 OK/);
  t.match(got, /\* 2 FETCH \(UID 2 FLAGS \(\\Flagged\) MODSEQ \(\d+\)\)\r\nc1 OK/);
  other.send(`c2 UID FETCH 1:* (FLAGS) (CHANGEDSINCE ${changed[0]!.modseq})`);
  const none = await other.until(/c1 OK[^]*\r\nc2 OK/);
  t.notMatch(none.split('c1 OK')[1] ?? '', /\* \d+ FETCH/, 'nothing changed since');
  // STORE .SILENT with UNCHANGEDSINCE older than the change: MODIFIED (RFC 7162 §3.1.3).
  other.send(`s1 UID STORE 2 (UNCHANGEDSINCE ${before}) +FLAGS.SILENT (\\Seen)`);
  await other.until(/s1 OK \[MODIFIED 2\]/);
});

t.test('UID COPY with COPYUID, the copy octet for octet; UID MOVE with COPYUID and EXPUNGE', async (t) => {
  const a = await makeInbox(storage);
  const c = await client(svc, a);
  t.teardown(() => c.close());
  const bytes = [multipart('first'), multipart('second'), multipart('third')];
  for (const b of bytes) await c.append('INBOX', b);
  await c.mailboxCreate('Archive');
  await c.mailboxOpen('INBOX');

  const copied = await c.messageCopy('2:3', 'Archive', { uid: true });
  t.ok(copied && copied.uidMap, 'COPYUID read by imapflow');
  t.same(
    [...(copied ? copied.uidMap!.entries() : [])],
    [
      [2, 1],
      [3, 2],
    ],
  );
  const raw = await loggedIn(a);
  t.teardown(() => raw.close());
  raw.send('k1 UID COPY 1 Archive');
  await raw.until(/k1 OK \[COPYUID \d+ 1 3\] UID COPY completed/);

  const raw2 = await loggedIn(a, 'Archive');
  t.teardown(() => raw2.close());
  raw2.send('f1 UID FETCH 1 BODY.PEEK[]');
  t.same(literalAfter(await raw2.until(/f1 OK/), 'BODY[]'), bytes[1], "the copy's octets");

  raw.send('m1 UID MOVE 2 Trash');
  await raw.until(/\* OK \[COPYUID \d+ 2 1\] moved\r\n\* 2 EXPUNGE\r\nm1 OK UID MOVE completed/);
  raw.send('m2 UID FETCH 1:* UID');
  await raw.until(/\* 1 FETCH \(UID 1\)\r\n\* 2 FETCH \(UID 3\)\r\nm2 OK/);
  // The imapflow session hears of the move at its next command.
  const expunged: number[] = [];
  c.on('expunge', (e) => expunged.push(e.seq ?? 0));
  await c.noop();
  t.same(expunged, [2]);
  const moved = await c.messageMove('3', 'Trash', { uid: true });
  t.same([...(moved ? moved.uidMap!.entries() : [])], [[3, 2]]);
  const trash = await c.mailboxOpen('Trash');
  t.equal(trash.exists, 2);
  const m = await c.fetchOne('2', { source: true }, { uid: true });
  t.same(m && m.source, bytes[2]);
});

t.test("Python's imaplib: LOGIN, SELECT, FETCH (RFC822), SEARCH", async (t) => {
  const a = await makeInbox(storage);
  const c = await client(svc, a);
  t.teardown(() => c.close());
  const bytes = multipart('From Python');
  await c.append('INBOX', multipart('Other'));
  await c.append('INBOX', bytes);
  const script = [
    'import imaplib, sys, json, base64',
    'port, user, pw = int(sys.argv[1]), sys.argv[2], sys.argv[3]',
    "m = imaplib.IMAP4('127.0.0.1', port)",
    'm.login(user, pw)',
    "typ, data = m.select('INBOX')",
    "typ, found = m.search(None, 'SUBJECT', '\"from python\"')",
    "typ, msg = m.fetch(found[0].decode(), '(RFC822)')",
    "typ, flags = m.fetch(found[0].decode(), '(FLAGS)')",
    'm.logout()',
    'print(json.dumps({"exists": data[0].decode(), "found": found[0].decode(),',
    '  "head": msg[0][0].decode(), "body": base64.b64encode(msg[0][1]).decode(), "flags": flags[0].decode()}))',
  ].join('\n');
  const out = await new Promise<string>((resolve, reject) =>
    execFile('python3', ['-c', script, String(svc.imapPort), a.address, a.password], (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
  const r = JSON.parse(out) as { exists: string; found: string; head: string; body: string; flags: string };
  t.equal(r.exists, '2');
  t.equal(r.found, '2');
  t.match(r.head, /^2 \(RFC822 \{\d+\}$/);
  t.same(Buffer.from(r.body, 'base64'), bytes, 'RFC822 is the message');
  // imaplib's session is the first to select the mailbox: the messages are \Recent to it (RFC 3501 §2.3.2).
  t.match(r.flags, /^2 \(FLAGS \(\\Seen \\Recent\)\)$/, 'RFC822 sets \\Seen like BODY[]');
});

t.test('FETCH of a message another session expunged: the rest answered, then NO [EXPUNGEISSUED]', async (t) => {
  const a = await makeInbox(storage);
  const other = await client(svc, a);
  for (const n of [1, 2, 3]) await other.append('INBOX', crlf(`Subject: m${n}\n\nbody ${n}\n`));
  const raw = await loggedIn(a);
  t.match(raw.text(), /\* 3 EXISTS/);
  // The other session expunges message 2; this one still numbers it until it may be told (RFC 3501 §7.4.1).
  const lock = await other.getMailboxLock('INBOX');
  await other.messageDelete('2');
  lock.release();
  await other.logout();
  raw.send('f FETCH 1:3 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])');
  const text = await raw.until(/\r\nf (OK|NO|BAD)[^\r]*\r\n/);
  const answer = text.slice(text.indexOf('\r\ns OK'));
  t.match(answer, /\* 1 FETCH[^]*Subject: m1[^]*\* 3 FETCH[^]*Subject: m3/, 'messages 1 and 3 answered');
  // (Its flag change, \Deleted, may still be told as an unsolicited FETCH: it happened before the expunge.)
  t.notMatch(answer, /\* 2 FETCH \(BODY/, 'no body for message 2');
  t.notMatch(answer, /\* 2 EXPUNGE/, 'no EXPUNGE during FETCH (RFC 3501 §7.4.1)');
  t.match(answer, /f NO \[EXPUNGEISSUED\]/, 'RFC 2180 §4.1.3, RFC 5530 §3');
  raw.send('n NOOP');
  await raw.until(/\* 2 EXPUNGE\r\n[^]*n OK/);
  raw.send('u UID FETCH 1:* (FLAGS)');
  await raw.until(/u OK/);
  t.pass('the EXPUNGE comes at the next command, and UID FETCH answers what exists');
  raw.close();
});
