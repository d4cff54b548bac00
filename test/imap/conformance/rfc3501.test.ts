// RFC 3501 §8, the sample IMAP4rev1 connection, replayed through a raw socket against the service: the
// mailbox is set up as the example's (18 messages, 16 seen and no longer recent, message 12 the RFC's own
// "IMAP4rev1 WG mtg summary and minutes" with its INTERNALDATE), each client line is sent as the RFC
// writes it (lower-case commands included), and each server line of the RFC must come back (untagged
// data in any order, RFC 3501 §7; the tagged status last).
// Values that depend on the store (UIDVALIDITY, sizes) are compared as numbers, marked <n>; texts after a
// status code are free (RFC 3501 §7.1: "human-readable text"), marked <text>. Lines the RFC leaves out
// (PERMANENTFLAGS, UIDNEXT, HIGHESTMODSEQ) may come in between.
import t from 'tap';
import { startTestService } from '../../helpers/service.js';
import { makeInbox, rawImap } from '../../helpers/imap-inbox.js';
import { exchange } from './replay.js';

const svc = await startTestService(t);
const { storage } = svc.running;
const a = await makeInbox(storage, { localpart: 'mrc' });
const inbox = a.mailboxes.get('INBOX')!;

// Message 12 of the example: its ENVELOPE and BODY in the RFC are what these headers and body give.
const body = Array.from({ length: 92 }, (_, i) => `line ${String(i).padStart(2, '0')} ${'x'.repeat(22)}`);
const bodyText = body.join('\r\n') + '\r\n';
const rfcMessage = Buffer.from(
  [
    'Date: Wed, 17 Jul 1996 02:23:25 -0700 (PDT)',
    'From: Terry Gray <gray@cac.washington.edu>',
    'Subject: IMAP4rev1 WG mtg summary and minutes',
    'To: imap@cac.washington.edu',
    'cc: minutes@CNRI.Reston.VA.US, John Klensin <KLENSIN@MIT.EDU>',
    'Message-Id: <B27397-0100000@cac.washington.edu>',
    'MIME-Version: 1.0',
    'Content-Type: TEXT/PLAIN; CHARSET=US-ASCII',
    '',
    bodyText,
  ].join('\r\n'),
);

for (let n = 1; n <= 18; n++) {
  const raw = n === 12 ? rfcMessage : Buffer.from(`Subject: message ${n}\r\n\r\nbody ${n}\r\n`);
  const blob = await storage.mail.blobs.put(raw);
  await storage.mail.store.append({
    mailboxId: inbox,
    blob,
    flags: n <= 16 ? ['\\Seen'] : [],
    internalDate: n === 12 ? new Date('1996-07-17T02:44:25-07:00') : new Date(),
  });
  await storage.mail.blobs.release(blob.address);
}
// Messages 1 to 16 were seen by an earlier session: only 17 and 18 are still \Recent (RFC 3501 §2.3.2).
await storage.db.query('UPDATE mailboxes SET recent_uid = 16 WHERE id = $1', [inbox]);

t.test('RFC 3501 §8: the sample IMAP4rev1 connection', async (t) => {
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK[^\r]*\r\n/);
  t.match(raw.text(), /^\* OK \[CAPABILITY IMAP4rev1 [^\]]*\] [^\r]*\r\n$/, 'the greeting (§7.1.1)');
  await exchange(t, raw, `a001 login ${a.address} ${a.password}`, ['a001 OK <text>']);
  await exchange(t, raw, 'a002 select inbox', [
    '* 18 EXISTS',
    '* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)',
    '* 2 RECENT',
    '* OK [UNSEEN 17] <text>',
    '* OK [UIDVALIDITY <n>] <text>',
    'a002 OK [READ-WRITE] <text>',
  ]);
  await exchange(t, raw, 'a003 fetch 12 full', [
    // The example's INTERNALDATE, the same instant as we keep it: in UTC (the zone is not stored).
    '* 12 FETCH (FLAGS (\\Seen) INTERNALDATE "17-Jul-1996 09:44:25 +0000" RFC822.SIZE <n> ENVELOPE (' +
      '"Wed, 17 Jul 1996 02:23:25 -0700 (PDT)" "IMAP4rev1 WG mtg summary and minutes" ' +
      '(("Terry Gray" NIL "gray" "cac.washington.edu")) (("Terry Gray" NIL "gray" "cac.washington.edu")) ' +
      '(("Terry Gray" NIL "gray" "cac.washington.edu")) ((NIL NIL "imap" "cac.washington.edu")) ' +
      '((NIL NIL "minutes" "CNRI.Reston.VA.US") ("John Klensin" NIL "KLENSIN" "MIT.EDU")) NIL NIL ' +
      '"<B27397-0100000@cac.washington.edu>") BODY ("TEXT" "PLAIN" ("CHARSET" "US-ASCII") NIL NIL "7BIT" ' +
      `${Buffer.byteLength(bodyText)} 92))`,
    'a003 OK <text>',
  ]);
  const header = await exchange(t, raw, 'a004 fetch 12 body[header]', [
    '* 12 FETCH (BODY[HEADER] {<n>}',
    'a004 OK <text>',
  ]);
  const size = Number(/\{(\d+)\}$/.exec(header.find((l) => l.includes('BODY[HEADER]')) ?? '')?.[1]);
  t.equal(size, rfcMessage.indexOf('\r\n\r\n') + 4, 'the header literal: every header line and the blank line');
  await exchange(t, raw, 'a005 store 12 +flags \\deleted', ['* 12 FETCH (FLAGS (\\Seen \\Deleted))', 'a005 OK <text>']);
  await exchange(t, raw, 'a006 logout', ['* BYE <text>', 'a006 OK <text>']);
});
