// RFC 3501 §2.3.2 \Recent: a message is recent to the first session that selects its mailbox read-write
// after it arrived, and to a session that has the mailbox selected when it arrives; EXAMINE and STATUS look
// without taking (docs/decisions.md #51).
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { makeInbox, rawSession, type RawImap } from '../helpers/imap-inbox.js';
import type { Storage } from '../../storage/index.js';

const svc = await startTestService(t);
const { storage } = svc.running;
const a = await makeInbox(storage);

async function deliver(s: Storage, subject: string) {
  const blob = await s.mail.blobs.put(Buffer.from(`Subject: ${subject}\r\n\r\nbody\r\n`));
  try {
    await s.mail.store.append({ mailboxId: a.mailboxes.get('INBOX')!, blob, internalDate: new Date() });
  } finally {
    await s.mail.blobs.release(blob.address);
  }
}

const session = () => rawSession(svc.imapPort, a);

/** Sends a command and answers what the server said for it, up to its tagged line. */
async function say(raw: RawImap, tag: string, command: string): Promise<string> {
  const from = raw.text().length;
  raw.send(`${tag} ${command}`);
  await raw.until(new RegExp(`\\r\\n${tag} (OK|NO|BAD)[^\\r]*\\r\\n$`));
  return raw.text().slice(from);
}

t.test('the first read-write SELECT takes the new messages as recent; EXAMINE and STATUS only look', async (t) => {
  await deliver(storage, 'one');
  await deliver(storage, 'two');
  const looker = await session();
  t.match(await say(looker, 'x', 'STATUS INBOX (MESSAGES RECENT)'), /\* STATUS "INBOX" \(MESSAGES 2 RECENT 2\)/);
  t.match(await say(looker, 'e', 'EXAMINE INBOX'), /\* 2 RECENT\r\n/, 'EXAMINE sees them recent');
  t.match(await say(looker, 'f', 'FETCH 1:2 (FLAGS)'), /\* 1 FETCH \(FLAGS \(\\Recent\)\)/);

  const first = await session();
  t.match(await say(first, 's', 'SELECT INBOX'), /\* 2 RECENT\r\n/, 'the first SELECT takes both');
  t.match(await say(first, 'r', 'SEARCH RECENT'), /\* SEARCH 1 2\r\n/);
  t.match(await say(first, 'n', 'SEARCH NEW'), /\* SEARCH 1 2\r\n/, 'NEW: recent and unseen');

  const second = await session();
  t.match(await say(second, 's', 'SELECT INBOX'), /\* 0 RECENT\r\n/, 'a later SELECT gets none');
  t.match(await say(second, 'f', 'FETCH 1 (FLAGS)'), /\* 1 FETCH \(FLAGS \(\)\)/);
  t.match(await say(second, 'o', 'SEARCH OLD'), /\* SEARCH 1 2\r\n/);
  t.match(await say(looker, 'y', 'STATUS INBOX (RECENT)'), /\* STATUS "INBOX" \(RECENT 0\)/, 'taken: none left');

  // Mail that arrives while sessions have the mailbox selected is recent to them (RFC 3501 §7.3.2 RECENT).
  await deliver(storage, 'three');
  const told = await say(first, 'p', 'NOOP');
  t.match(told, /\* 3 EXISTS\r\n\* 3 RECENT\r\n/, 'EXISTS, then the new RECENT count');
  t.match(await say(first, 'q', 'FETCH 3 (FLAGS)'), /\* 3 FETCH \(FLAGS \(\\Recent\)\)/);
  for (const raw of [looker, first, second]) raw.close();
});
