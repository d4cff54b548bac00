// The mailbox-level commands on the real service, driven by imapflow and raw sockets: LIST with the
// RFC 6154 roles, CREATE/RENAME (inferiors move along)/DELETE, SELECT's numbers, APPEND (APPENDUID,
// OVERQUOTA), and two sessions seeing each other's appends and expunges, at once while in IDLE, also
// when the change comes from the store directly (the MX's path) or from another Storage handle.
import t from 'tap';
import { ImapFlow } from 'imapflow';
import { startTestService, type TestService } from '../helpers/service.js';
import { makeInbox, rawImap, rawSession, type TestInbox } from '../helpers/imap-inbox.js';
import { waitFor } from '../helpers/wait-for.js';
import { findInbox } from '../../storage/pg/inboxes.js';
import type { Storage } from '../../storage/index.js';

const client = (svc: TestService, a: TestInbox) =>
  new ImapFlow({
    host: '127.0.0.1',
    port: svc.imapPort,
    secure: false,
    auth: { user: a.address, pass: a.password },
    logger: false,
    disableAutoIdle: true,
  });

const message = (n: number | string) =>
  Buffer.from(`From: a@example.test\r\nTo: b@example.test\r\nSubject: m${n}\r\n\r\nbody ${n}\r\n`);

/** An append through the mail store, as the MX listener files mail. */
async function deliver(storage: Storage, mailboxId: string, body: Buffer) {
  const blob = await storage.mail.blobs.put(body);
  try {
    return await storage.mail.store.append({ mailboxId, blob, internalDate: new Date() });
  } finally {
    await storage.mail.blobs.release(blob.address);
  }
}

t.test('LIST shows the five mailboxes with their roles; CREATE, RENAME with children, DELETE', async (t) => {
  const svc = await startTestService(t);
  const a = await makeInbox(svc.running.storage);
  const c = client(svc, a);
  await c.connect();
  t.teardown(() => c.close());
  const list = await c.list();
  t.same(list.map((m) => [m.path, m.specialUse ?? null]).sort(), [
    ['Drafts', '\\Drafts'],
    ['INBOX', '\\Inbox'],
    ['Junk', '\\Junk'],
    ['Sent', '\\Sent'],
    ['Trash', '\\Trash'],
  ]);
  await c.mailboxCreate('Work/Projects');
  await c.mailboxCreate('Work/Projects/Old');
  const names = async () => (await c.list()).map((m) => m.path).sort();
  t.ok((await names()).includes('Work'), 'CREATE made the superior too (RFC 3501 §6.3.3)');
  await c.mailboxRename('Work', 'Jobs/Current');
  t.same(
    (await names()).filter((n) => /^(Work|Jobs)/.test(n)),
    ['Jobs', 'Jobs/Current', 'Jobs/Current/Projects', 'Jobs/Current/Projects/Old'],
    'inferiors renamed along',
  );
  // imapflow reads NO [ALREADYEXISTS] as "not created" rather than an error.
  t.equal((await c.mailboxCreate('Jobs')).created, false, 'CREATE of an existing name fails');
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  raw.send(`l LOGIN ${a.address} ${a.password}`);
  await raw.until(/l OK/);
  raw.send('d1 DELETE Jobs/Current');
  await raw.until(/d1 NO \[HASCHILDREN\]/);
  raw.send('d2 DELETE INBOX');
  await raw.until(/d2 NO \[CANNOT\]/);
  raw.send('d3 DELETE Nothing');
  await raw.until(/d3 NO \[NONEXISTENT\]/);
  raw.send('d4 DELETE Jobs/Current/Projects/Old');
  await raw.until(/d4 OK/);
  raw.send('s1 STATUS Sent (MESSAGES UIDNEXT UIDVALIDITY UNSEEN HIGHESTMODSEQ APPENDLIMIT)');
  await raw.until(/\* STATUS "Sent" \(MESSAGES 0 UIDNEXT 1 UIDVALIDITY \d+ UNSEEN 0 HIGHESTMODSEQ 1 APPENDLIMIT \d+\)/);
  raw.send('q1 GETQUOTAROOT INBOX');
  await raw.until(/\* QUOTAROOT "INBOX" ""\r\n\* QUOTA "" \(STORAGE 0 1048576\)\r\nq1 OK/);
  raw.send('n1 LIST "" ""');
  await raw.until(/\* LIST \(\\Noselect\) "\/" ""\r\nn1 OK/);
  raw.send('n2 LIST "" "%"');
  await raw.until(/n2 OK/);
  t.notMatch(raw.text().split('n1 OK')[1], /Jobs\/Current/, '% stops at the delimiter');
  raw.close();
  t.notOk((await names()).includes('Jobs/Current/Projects/Old'), 'deleted');

  // RFC 3501 §6.3.5: renaming INBOX moves its messages into the new mailbox and leaves INBOX empty.
  await c.append('INBOX', message(1));
  await c.mailboxRename('INBOX', 'Old Inbox');
  const messages = async (path: string) => {
    const st = await c.status(path, { messages: true });
    return st ? st.messages : -1;
  };
  t.equal(await messages('Old Inbox'), 1);
  t.equal(await messages('INBOX'), 0);
});

t.test('SELECT numbers; APPEND seen by a second session at its next NOOP; EXPUNGE too', async (t) => {
  const svc = await startTestService(t);
  const a = await makeInbox(svc.running.storage);
  const one = client(svc, a);
  const two = client(svc, a);
  await one.connect();
  await two.connect();
  t.teardown(() => Promise.all([one.close(), two.close()]));
  const box = await one.mailboxOpen('INBOX');
  t.equal(box.exists, 0);
  t.equal(Number(box.uidNext), 1);
  t.ok(Number(box.uidValidity) > 0);
  t.equal(box.highestModseq, 1n, 'HIGHESTMODSEQ (RFC 7162 §3.1.2.1)');
  await two.mailboxOpen('INBOX');

  const appended = await one.append('INBOX', message(1), ['\\Seen']);
  t.ok(appended && appended.uid === 1, 'APPENDUID names UID 1');
  const exists: number[] = [];
  two.on('exists', (e) => exists.push(e.count));
  await two.noop();
  await waitFor(() => exists.includes(1), { what: 'EXISTS 1 in the second session' });

  // UIDs only grow: after an expunge the next message gets a new UID.
  await one.append('INBOX', message(2));
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  raw.send(`l LOGIN ${a.address} ${a.password}`);
  raw.send('s SELECT INBOX');
  await raw.until(/\* 2 EXISTS[^]*OK \[UIDNEXT 3\][^]*OK \[HIGHESTMODSEQ \d+\][^]*s OK \[READ-WRITE\]/);
  // A flag change made through the store directly (test/imap/server-messages.test.ts has STORE's own).
  await svc.running.storage.mail.store.setFlags(a.mailboxes.get('INBOX') as string, [1], {
    mode: 'add',
    flags: ['\\Deleted'],
  });
  raw.send('n NOOP');
  await raw.until(/\* 1 FETCH \(UID 1 FLAGS \(\\Seen \\Deleted\)\)[^]*n OK/);
  raw.send('e EXPUNGE');
  await raw.until(/\* 1 EXPUNGE\r\ne OK/);
  const expunged: number[] = [];
  two.on('expunge', (e) => expunged.push(e.seq ?? 0));
  await two.noop();
  await waitFor(() => expunged.includes(1), { what: 'EXPUNGE seen by the other session' });
  const next = await one.append('INBOX', message(3));
  t.equal(next && next.uid, 3, 'a new UID, never a reused one');
  raw.send('c CLOSE');
  await raw.until(/c OK CLOSE/);
  raw.close();

  // UIDVALIDITY survives a restart.
  const uidValidity = async (c: ImapFlow) => {
    const st = await c.status('INBOX', { uidValidity: true });
    return st ? Number(st.uidValidity) : -1;
  };
  const before = await uidValidity(one);
  await one.close();
  await two.close();
  await svc.restart();
  const again = client(svc, a);
  await again.connect();
  t.teardown(() => again.close());
  t.equal(await uidValidity(again), before);
});

t.test('IDLE is woken by an append made through the store', async (t) => {
  const svc = await startTestService(t);
  const { storage } = svc.running;
  const a = await makeInbox(storage);
  const raw = await rawSession(svc.imapPort, a, { select: 'INBOX', idle: true });
  await deliver(storage, a.mailboxes.get('INBOX') as string, message('mx'));
  await raw.until(/\+ idling\r\n\* 1 EXISTS\r\n/, 'EXISTS while idling');
  await storage.mail.store.expunge(a.mailboxes.get('INBOX') as string, [1]);
  await raw.until(/\* 1 EXPUNGE\r\n/, 'EXPUNGE while idling');
  raw.send('DONE');
  await raw.until(/i OK IDLE terminated/);
  t.pass('EXISTS and EXPUNGE arrived while idling, and DONE ended IDLE');
  raw.close();
});

t.test(
  'IDLE is woken by an append from another Storage handle (LISTEN/NOTIFY)',
  { skip: process.env.SVC_DATABASE_URL ? false : 'PGlite lives in one process: no other handle to notify from' },
  async (t) => {
    const svc = await startTestService(t);
    const a = await makeInbox(svc.running.storage);
    const peer = await startTestService(t, { nodeOf: svc });
    const raw = await rawImap(svc.imapPort);
    await raw.until(/^\* OK/);
    raw.send(`l LOGIN ${a.address} ${a.password}`);
    raw.send('s SELECT INBOX');
    await raw.until(/s OK/);
    raw.send('i IDLE');
    await raw.until(/\+ idling\r\n/);
    await deliver(peer.running.storage, a.mailboxes.get('INBOX') as string, message('peer'));
    await raw.until(/\* 1 EXISTS\r\n/, 'EXISTS from the other process');
    raw.send('DONE');
    await raw.until(/i OK/);
    t.pass('woken across processes');
    raw.close();
  },
);

t.test('APPEND past the quota is NO [OVERQUOTA]; Sent counts like any mailbox', async (t) => {
  const svc = await startTestService(t);
  const { storage } = svc.running;
  const a = await makeInbox(storage);
  await storage.db.query('UPDATE inboxes SET storage_limit_bytes = 300 WHERE id = $1', [a.inbox.id]);
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  raw.send(`l LOGIN ${a.address} ${a.password}`);
  await raw.until(/l OK/);
  const body = message('x'.repeat(100));
  raw.send(Buffer.concat([Buffer.from(`a1 APPEND Sent (\\Seen) {${body.length}+}\r\n`), body, Buffer.from('\r\n')]));
  await raw.until(/a1 OK \[APPENDUID \d+ 1\]/);
  t.equal((await findInbox(storage.db, a.inbox.id))?.usedBytes, body.length, 'Sent counts toward storage');
  raw.send(Buffer.concat([Buffer.from(`a2 APPEND Drafts {${body.length}+}\r\n`), body, Buffer.from('\r\n')]));
  await raw.until(/a2 NO \[OVERQUOTA\]/);
  raw.send(Buffer.concat([Buffer.from(`a3 APPEND Nowhere {${body.length}+}\r\n`), body, Buffer.from('\r\n')]));
  await raw.until(/a3 NO \[TRYCREATE\]/);
  raw.send('a4 NOOP');
  await raw.until(/a4 OK/);
  raw.close();
});
