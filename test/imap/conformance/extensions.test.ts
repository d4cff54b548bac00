// The extensions we advertise, each replaying its RFC's own example exchange through a raw socket (one
// service, one inbox; the subtests are named by RFC and section). Numbers the store decides (UIDVALIDITY,
// UIDs, MODSEQs, sizes) are <n>; human-readable texts are <text>.
import t from 'tap';
import { startTestService } from '../../helpers/service.js';
import { makeInbox, rawImap, rawSession } from '../../helpers/imap-inbox.js';
import { answer, exchange } from './replay.js';

const svc = await startTestService(t);
const a = await makeInbox(svc.running.storage, { localpart: 'fred' });

const loggedIn = () => rawSession(svc.imapPort, a);

const msg = (subject: string) => `Subject: ${subject}\r\n\r\nhello\r\n`;

t.test('RFC 7888 §4 LITERAL+: non-synchronizing literals need no continuation', async (t) => {
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  const from = raw.text().length;
  raw.send(
    Buffer.from(`A001 LOGIN {${a.address.length}+}\r\n${a.address} {${a.password.length}+}\r\n${a.password}\r\n`),
  );
  await answer(t, raw, from, 'A001', 'A001 LOGIN {n+} … {n+} …', ['A001 OK <text>']);
  t.notMatch(raw.text().slice(from), /^\+ /m, 'no continuation request');
  raw.close();
});

t.test('RFC 2342 §5 NAMESPACE, RFC 2971 §3.4 ID, RFC 5161 §3.1 ENABLE', async (t) => {
  const raw = await loggedIn();
  await exchange(t, raw, 'A001 NAMESPACE', ['* NAMESPACE (("" "/")) NIL NIL', 'A001 OK <text>']);
  await exchange(t, raw, 'a023 ID ("name" "sodr" "version" "19.34" "vendor" "Pink Floyd Music Limited")', [
    '* ID ("name" "svc-mail" "version" "<text>")',
    'a023 OK <text>',
  ]);
  await exchange(t, raw, 't1 ENABLE CONDSTORE', ['* ENABLED CONDSTORE', 't1 OK <text>']);
  // §3.1: an extension already enabled, or unknown, is not listed again.
  await exchange(t, raw, 't2 ENABLE CONDSTORE X-GOOD-IDEA', ['* ENABLED', 't2 OK <text>']);
  raw.close();
});

t.test('RFC 6154 §5.1 SPECIAL-USE: LIST shows the roles', async (t) => {
  const raw = await loggedIn();
  await exchange(t, raw, 't1 LIST "" "%"', [
    // Names as quoted strings (RFC 3501 §9 mailbox = astring), the roles among the attributes.
    '* LIST (<text>) "/" "INBOX"',
    '* LIST (<text>\\Drafts<text>) "/" "Drafts"',
    '* LIST (<text>\\Junk<text>) "/" "Junk"',
    '* LIST (<text>\\Sent<text>) "/" "Sent"',
    '* LIST (<text>\\Trash<text>) "/" "Trash"',
    't1 OK <text>',
  ]);
  raw.close();
});

t.test('RFC 4315 §3 UIDPLUS: APPENDUID, COPYUID, UID EXPUNGE', async (t) => {
  const raw = await loggedIn();
  const m = msg('uidplus');
  const from = raw.text().length;
  raw.send(`A003 APPEND INBOX {${m.length}+}\r\n${m}`);
  await answer(t, raw, from, 'A003', 'A003 APPEND saved-messages (\\Seen) {…}', ['A003 OK [APPENDUID <n> <n>] <text>']);
  await exchange(t, raw, 'A003b SELECT INBOX', ['A003b OK [READ-WRITE] <text>']);
  await exchange(t, raw, 'A004 COPY 1 Trash', ['A004 OK [COPYUID <n> <n> <n>] <text>']);
  await exchange(t, raw, 'A202 STORE 1 +FLAGS.SILENT (\\Deleted)', ['A202 OK <text>']);
  await exchange(t, raw, 'A203 UID EXPUNGE 1', ['* 1 EXPUNGE', 'A203 OK <text>']);
  raw.close();
});

t.test('RFC 6851 §4.3 MOVE, RFC 3691 §3 UNSELECT', async (t) => {
  const raw = await loggedIn();
  const m = msg('to be moved');
  raw.send(`p APPEND INBOX {${m.length}+}\r\n${m}`);
  await raw.until(/p OK/);
  await exchange(t, raw, 'a1 SELECT INBOX', ['a1 OK [READ-WRITE] <text>']);
  await exchange(t, raw, 'a2 UID MOVE 1:* Junk', ['* OK [COPYUID <n> <n> <n>] <text>', '* 1 EXPUNGE', 'a2 OK <text>']);
  await exchange(t, raw, 'A342 UNSELECT', ['A342 OK <text>']);
  await exchange(t, raw, 'A343 FETCH 1 FLAGS', ['A343 BAD <text>']);
  raw.close();
});

t.test('RFC 9208 §4.3 QUOTA, RFC 7889 §4 APPENDLIMIT', async (t) => {
  const raw = await loggedIn();
  await exchange(t, raw, 'G0001 GETQUOTAROOT INBOX', [
    '* QUOTAROOT "INBOX" ""',
    '* QUOTA "" (STORAGE <n> 1048576)',
    'G0001 OK <text>',
  ]);
  await exchange(t, raw, 'G0002 GETQUOTA ""', ['* QUOTA "" (STORAGE <n> 1048576)', 'G0002 OK <text>']);
  await exchange(t, raw, 't1 CAPABILITY', ['* CAPABILITY <text> APPENDLIMIT=<n><text>', 't1 OK <text>']);
  raw.close();
});

t.test('RFC 7162 §3.1 CONDSTORE: HIGHESTMODSEQ, UNCHANGEDSINCE, CHANGEDSINCE', async (t) => {
  const raw = await loggedIn();
  const m = msg('condstore');
  raw.send(`p APPEND INBOX {${m.length}+}\r\n${m}`);
  await raw.until(/p OK/);
  const sel = await exchange(t, raw, 'a03 SELECT INBOX (CONDSTORE)', [
    '* OK [HIGHESTMODSEQ <n>] <text>',
    'a03 OK <text>',
  ]);
  const modseq = Number(/HIGHESTMODSEQ (\d+)/.exec(sel.join('\n'))?.[1]);
  // The RFC's examples use UIDs of their own; here the only message is number 1, whatever its UID.
  await exchange(t, raw, `a103 STORE 1 (UNCHANGEDSINCE ${modseq}) +FLAGS (\\Seen)`, [
    '* 1 FETCH (<text>MODSEQ (<n>)<text>)',
    'a103 OK <text>',
  ]);
  // §3.1.3 example 8: a store conditional on an older MODSEQ fails with MODIFIED.
  await exchange(t, raw, `a104 STORE 1 (UNCHANGEDSINCE ${modseq}) +FLAGS (\\Flagged)`, ['a104 OK [MODIFIED 1] <text>']);
  await exchange(t, raw, `s100 FETCH 1:* (FLAGS) (CHANGEDSINCE ${modseq})`, [
    '* 1 FETCH (FLAGS (\\Seen<text>) MODSEQ (<n>))',
    's100 OK <text>',
  ]);
  raw.close();
});

t.test('RFC 2177 §3 IDLE', async (t) => {
  const raw = await loggedIn();
  await exchange(t, raw, 'A001 SELECT INBOX', ['A001 OK <text>']);
  const from = raw.text().length;
  raw.send('A002 IDLE');
  await raw.until(/\+ idling\r\n$/);
  raw.send('DONE');
  await answer(t, raw, from, 'A002', 'A002 IDLE … DONE', ['+ idling', 'A002 OK <text>']);
  raw.close();
});
