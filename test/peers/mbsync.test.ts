// Debian's isync (mbsync 1.4) syncing an inbox both ways with our IMAP server, over STARTTLS with the
// configured certificate: what the server holds reaches a local Maildir with its flags, a message and a
// flag added locally reach the server, changes on either side reach the other, deletions included, and a
// sync with nothing new changes nothing (no duplicate on either side).
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rename, rm, writeFile, unlink } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { ImapFlow } from 'imapflow';
import { startTestService } from '../helpers/service.js';
import { makeInbox } from '../helpers/imap-inbox.js';
import { selfSigned } from '../mta/mx-limits-wire.js';
import type { Storage } from '../../storage/index.js';

const run = promisify(execFile);
const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-mbsync-'));
t.teardown(() => rm(dir, { recursive: true, force: true }));
const pair = await selfSigned(dir, 'imap', 'localhost');
const svc = await startTestService(t, { env: { SVC_TLS_CERT: pair.cert, SVC_TLS_KEY: pair.key } });
const { storage } = svc.running;
const a = await makeInbox(storage);

const message = (subject: string) =>
  Buffer.from(
    [
      'From: far@example.test',
      `To: ${a.address}`,
      `Subject: ${subject}`,
      `Message-ID: <${subject}@example.test>`,
      '',
      `${subject} body`,
      '',
    ].join('\r\n'),
  );

/** An append through the mail store, as the MX listener and the import API file mail. */
async function deliver(s: Storage, mailbox: string, subject: string, flags: string[] = []) {
  const blob = await s.mail.blobs.put(message(subject));
  try {
    await s.mail.store.append({ mailboxId: a.mailboxes.get(mailbox)!, blob, internalDate: new Date(), flags });
  } finally {
    await s.mail.blobs.release(blob.address);
  }
}

const maildir = path.join(dir, 'mail');
await mkdir(maildir);
const rc = path.join(dir, 'mbsyncrc');
await writeFile(
  rc,
  [
    'IMAPAccount svc',
    'Host localhost', // the name in the certificate; it resolves to the loopback the service listens on
    `Port ${svc.imapPort}`,
    `User ${a.address}`,
    `Pass ${a.password}`,
    'SSLType STARTTLS',
    // A host certificate: trusted as it is, whatever its name and issuer (mbsync(1)).
    `CertificateFile ${pair.cert}`,
    'SystemCertificates no',
    '',
    'IMAPStore remote',
    'Account svc',
    '',
    'MaildirStore local',
    `Path ${maildir}/`,
    `Inbox ${maildir}/INBOX`,
    'SubFolders Verbatim',
    '',
    'Channel both',
    'Far :remote:',
    'Near :local:',
    'Patterns *',
    'Create Both',
    'Remove Both',
    'Expunge Both',
    'Sync All',
    `SyncState *`,
    '',
  ].join('\n'),
);

async function mbsync(): Promise<string> {
  try {
    const { stdout, stderr } = await run('mbsync', ['-c', rc, '-a'], { timeout: 30_000 });
    return stdout + stderr;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    throw new Error(`mbsync failed: ${e.message}\n${e.stdout ?? ''}\n${e.stderr ?? ''}`);
  }
}

/** The local Maildir's messages: subject → flags (the letters after ":2,"). */
async function local(folder: string): Promise<Map<string, { file: string; flags: string }>> {
  const out = new Map<string, { file: string; flags: string }>();
  for (const sub of ['cur', 'new']) {
    const where = path.join(maildir, folder, sub);
    for (const name of await readdir(where).catch(() => [] as string[])) {
      const subject = /^Subject: (.*)$/m.exec(await readFile(path.join(where, name), 'latin1'))?.[1]?.trim() ?? '';
      out.set(subject, { file: path.join(where, name), flags: /:2,([A-Z]*)$/.exec(name)?.[1] ?? '' });
    }
  }
  return out;
}

/** Runs `fn` in an imapflow session of the inbox (over STARTTLS), logged out after. */
async function onServer<T>(fn: (c: ImapFlow) => Promise<T>): Promise<T> {
  const c = new ImapFlow({
    host: '127.0.0.1',
    port: svc.imapPort,
    secure: false,
    tls: { rejectUnauthorized: false },
    auth: { user: a.address, pass: a.password },
    logger: false,
    disableAutoIdle: true,
  });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.logout();
  }
}

/** The server's messages in a mailbox: subject → flags, read with imapflow. */
const remote = (mailbox: string) =>
  onServer(async (c) => {
    const out = new Map<string, string[]>();
    const lock = await c.getMailboxLock(mailbox);
    try {
      for await (const m of c.fetch('1:*', { envelope: true, flags: true })) {
        out.set(m.envelope?.subject ?? '', [...(m.flags ?? [])].sort());
      }
    } catch (err) {
      if (!/empty|Invalid messageset/i.test(String(err))) throw err;
    } finally {
      lock.release();
    }
    return out;
  });

t.test('first sync: the server mailboxes arrive in the Maildir with their flags', async (t) => {
  await deliver(storage, 'INBOX', 'one');
  await deliver(storage, 'INBOX', 'two', ['\\Seen']);
  await deliver(storage, 'Sent', 'sent-one', ['\\Seen']);
  await mbsync();
  const inbox = await local('INBOX');
  t.same([...inbox.keys()].sort(), ['one', 'two']);
  t.equal(inbox.get('one')?.flags, '', 'unread stays unread');
  t.equal(inbox.get('two')?.flags, 'S', '\\Seen became S');
  const sent = await local('Sent');
  t.same([...sent.keys()], ['sent-one']);
  t.equal(sent.get('sent-one')?.flags, 'S');
});

t.test('a sync with nothing new changes nothing on either side', async (t) => {
  const before = { inbox: await local('INBOX'), server: await remote('INBOX') };
  await mbsync();
  t.same([...(await local('INBOX')).entries()], [...before.inbox.entries()], 'the Maildir is unchanged');
  t.same([...(await remote('INBOX')).entries()], [...before.server.entries()], 'the server is unchanged');
});

t.test('local changes reach the server: a new message, a flag', async (t) => {
  const inbox = await local('INBOX');
  const one = inbox.get('one')!;
  await rename(one.file, `${one.file.replace(/:2,[A-Z]*$/, '')}:2,F`);
  const name = `${Date.now()}.local1.${os.hostname()}`;
  await writeFile(path.join(maildir, 'INBOX', 'new', name), message('written-locally'));
  await mbsync();
  const server = await remote('INBOX');
  t.same([...server.keys()].sort(), ['one', 'two', 'written-locally'], 'APPENDed once');
  t.same(server.get('one'), ['\\Flagged'], 'the local F reached the server');
});

t.test('server changes reach the Maildir: a flag and an expunge', async (t) => {
  await onServer(async (c) => {
    const lock = await c.getMailboxLock('INBOX');
    try {
      const uids: Record<string, number> = {};
      for await (const m of c.fetch('1:*', { envelope: true, uid: true })) uids[m.envelope?.subject ?? ''] = m.uid;
      await c.messageFlagsAdd(String(uids['written-locally']), ['\\Seen'], { uid: true });
      await c.messageDelete(String(uids['two']), { uid: true });
    } finally {
      lock.release();
    }
  });
  await mbsync();
  const inbox = await local('INBOX');
  t.same([...inbox.keys()].sort(), ['one', 'written-locally'], 'the message expunged on the server is gone');
  t.equal(inbox.get('written-locally')?.flags, 'S', "the server's \\Seen arrived");
});

t.test('a message deleted locally is expunged on the server', async (t) => {
  const inbox = await local('INBOX');
  await unlink(inbox.get('one')!.file);
  await mbsync();
  t.same([...(await remote('INBOX')).keys()], ['written-locally']);
  await mbsync();
  t.same([...(await local('INBOX')).keys()], ['written-locally'], 'and stays so');
});
