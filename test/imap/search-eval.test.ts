// imap/search-eval.ts: every RFC 3501 §6.4.4 search key and RFC 7162 MODSEQ over five fixture messages,
// criteria written as a client sends them (through the real parser), and the order of evaluation: what
// a key costs decides whether header or body bytes are read at all.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseMimeTree } from '../../mail/mime-tree.js';
import {
  keyCost,
  matchesSearch,
  positionFilter,
  usesModseq,
  writtenDay,
  type SearchMessage,
  type SearchScope,
} from '../../imap/search-eval.js';
import type { SearchKey } from '../../imap/command-types.js';
import { parse } from './parse-helpers.js';

const DIR = fileURLToPath(new URL('../fixtures/mime/', import.meta.url));
const PREFIX = 'Received: from relay.example by us; Fri, 7 Jun 2024 10:00:01 +0100\r\nX-Spam-Score: 0.1\r\n';

interface Fixture {
  m: SearchMessage;
  bytes: Buffer;
}

function message(
  seq: number,
  uid: number,
  raw: Buffer,
  over: Partial<SearchMessage> & { prefix?: string } = {},
): Fixture {
  const prefix = Buffer.from(over.prefix ?? '');
  const tree = parseMimeTree(raw);
  const bytes = Buffer.concat([prefix, raw]);
  const m: SearchMessage = {
    seq,
    uid,
    modseq: BigInt(uid * 10),
    flags: [],
    recent: false,
    internalDate: new Date('2024-06-04T12:00:00Z'),
    size: bytes.length,
    tree,
    prefixLength: prefix.length,
    ...over,
  };
  return { m, bytes };
}

const fx = (name: string) => readFileSync(DIR + name);
const MESSAGES: Fixture[] = [
  message(1, 10, fx('simple.eml'), {
    flags: ['\\Seen', '\\Answered'],
    internalDate: new Date('2024-06-04T23:30:00Z'),
  }),
  message(2, 20, fx('alternative.eml'), {
    flags: ['\\Flagged', '$Work'],
    recent: true,
    internalDate: new Date('2024-06-05T00:10:00Z'),
  }),
  message(3, 30, fx('encoded-words.eml'), { flags: ['\\Deleted', '\\Draft', '\\Seen'], recent: true }),
  message(4, 40, fx('nested-rfc822.eml'), { prefix: PREFIX, flags: ['\\seen'] }),
  message(5, 50, fx('mixed-attachments.eml'), { internalDate: new Date('2024-06-06T12:00:00Z') }),
  message(
    6,
    60,
    Buffer.from(
      'Date: Mon, 3 Jun 2024 23:30:00 -0700\r\nSubject: late\r\nBcc: Hidden Person <hidden@example.net>\r\n' +
        'Content-Type: text/plain; charset=windows-1252\r\nContent-Transfer-Encoding: base64\r\n\r\n' +
        Buffer.from('price: 5\x80 only', 'latin1').toString('base64') +
        '\r\n',
    ),
  ),
];

let reads: { uid: number; start: number; end: number }[] = [];
const scope: SearchScope = {
  maxSeq: MESSAGES.length,
  maxUid: 60,
  read: async (m, start, end) => {
    reads.push({ uid: m.uid, start, end });
    const f = MESSAGES.find((x) => x.m.uid === m.uid)!;
    return f.bytes.subarray(start, end);
  },
};

const criteria = (text: string): SearchKey => {
  const c = parse(`a SEARCH ${text}`).command;
  if (c.name !== 'SEARCH') throw new Error('not a SEARCH');
  return c.criteria;
};

/** 8-bit text goes as a literal (RFC 3501 §4.3: quoted strings are 7-bit); LITERAL+ needs no continuation. */
const lit = (s: string): string => `{${Buffer.byteLength(s)}+}\r\n${s}`;

/** The UIDs of the fixture messages the criteria match. */
async function uids(text: string): Promise<number[]> {
  const key = criteria(text);
  const out: number[] = [];
  for (const { m } of MESSAGES) if (await matchesSearch(key, m, scope)) out.push(m.uid);
  return out;
}

t.test('flag keys, \\Recent, keywords (case-insensitive)', async (t) => {
  t.same(await uids('ALL'), [10, 20, 30, 40, 50, 60]);
  t.same(await uids('ANSWERED'), [10]);
  t.same(await uids('UNANSWERED'), [20, 30, 40, 50, 60]);
  t.same(await uids('DELETED'), [30]);
  t.same(await uids('UNDELETED'), [10, 20, 40, 50, 60]);
  t.same(await uids('DRAFT'), [30]);
  t.same(await uids('UNDRAFT'), [10, 20, 40, 50, 60]);
  t.same(await uids('FLAGGED'), [20]);
  t.same(await uids('UNFLAGGED'), [10, 30, 40, 50, 60]);
  t.same(await uids('SEEN'), [10, 30, 40], '\\seen in any case is \\Seen');
  t.same(await uids('UNSEEN'), [20, 50, 60]);
  t.same(await uids('RECENT'), [20, 30]);
  t.same(await uids('OLD'), [10, 40, 50, 60]);
  t.same(await uids('NEW'), [20], 'NEW is RECENT UNSEEN');
  t.same(await uids('KEYWORD $work'), [20]);
  t.same(await uids('UNKEYWORD $Work'), [10, 30, 40, 50, 60]);
});

t.test('sizes, UID and sequence sets with "*", MODSEQ', async (t) => {
  const sizes = MESSAGES.map((f) => f.m.size);
  const mid = [...sizes].sort((a, b) => a - b)[2]!;
  t.same(
    await uids(`LARGER ${mid}`),
    MESSAGES.filter((f) => f.m.size > mid).map((f) => f.m.uid),
  );
  t.same(
    await uids(`SMALLER ${mid}`),
    MESSAGES.filter((f) => f.m.size < mid).map((f) => f.m.uid),
  );
  t.same(await uids(`LARGER ${MESSAGES[0]!.m.size} SMALLER ${MESSAGES[0]!.m.size}`), [], 'strictly');
  t.same(await uids('UID 20:30,55:*'), [20, 30, 60]);
  t.same(await uids('UID 100:*'), [60], '"*" is the largest UID, so 100:* names the last message');
  t.same(await uids('2,4:5'), [20, 40, 50]);
  t.same(await uids('*'), [60]);
  t.same(await uids('MODSEQ 400'), [40, 50, 60]);
  t.same(await uids('MODSEQ "/flags/\\\\draft" all 300'), [30, 40, 50, 60]);
  t.ok(usesModseq(criteria('OR SEEN NOT MODSEQ 5')));
  t.notOk(usesModseq(criteria('SEEN')));
});

t.test('dates: INTERNALDATE by its day, SENT* by the day written in the Date field', async (t) => {
  t.same(await uids('ON 4-Jun-2024'), [10, 30, 40, 60], '23:30 UTC is still the 4th');
  t.same(await uids('BEFORE 5-Jun-2024'), [10, 30, 40, 60]);
  t.same(await uids('SINCE 5-Jun-2024'), [20, 50]);
  t.same(await uids('SINCE 6-Jun-2024'), [50]);
  t.same(await uids('SENTON 4-Jun-2024'), [10]);
  t.same(await uids('SENTON 7-Jun-2024'), [30, 40], '"7 Jun 24" is 2024 (RFC 5322 §4.3)');
  t.same(await uids('SENTON 3-Jun-2024'), [60], '23:30 -0700 on the 3rd is the 3rd, whatever UTC says');
  t.same(await uids('SENTBEFORE 5-Jun-2024'), [10, 60]);
  t.same(await uids('SENTSINCE 6-Jun-2024'), [30, 40, 50]);
  t.equal(writtenDay('Thu, 6 Jun 2024 08:00:00 -0400'), 20240606);
  t.equal(writtenDay('1 January 99 00:00 GMT'), 19990101);
  t.equal(writtenDay('garbage'), null);
  // No Date field: the day of INTERNALDATE.
  const dateless = message(1, 1, Buffer.from('Subject: x\r\n\r\nbody\r\n'), {
    internalDate: new Date('2020-02-02T10:00:00Z'),
  });
  t.ok(await matchesSearch(criteria('SENTON 2-Feb-2020'), dateless.m, scope));
});

t.test('address and subject keys: substrings, any case, encoded words decoded', async (t) => {
  t.same(await uids('FROM alice'), [10]);
  t.same(await uids('FROM "ALICE EXAMPLE"'), [10], 'the display name counts');
  t.same(await uids('FROM shop.example'), [20]);
  t.same(await uids(`FROM ${lit('André')}`), [30], 'RFC 2047 name decoded');
  t.same(await uids('TO carol@example.net'), [10]);
  t.same(await uids('TO bob'), [10], 'the To of an attached message is not the To');
  t.same(await uids(`CC ${lit('éloise')}`), [30]);
  t.same(await uids('CC plain@example.com'), [30]);
  t.same(await uids('BCC hidden'), [60]);
  t.same(await uids('SUBJECT "lunch on"'), [10], 'the folded subject unfolds');
  t.same(await uids(`SUBJECT ${lit('té plain')}`), [30]);
  t.same(await uids('SUBJECT offers'), [20, 40]);
});

t.test('HEADER: envelope fields from the envelope, others from the header bytes (prefix included)', async (t) => {
  t.same(await uids('HEADER Message-ID report-6'), [50]);
  t.same(await uids('HEADER IN-REPLY-TO ""'), [10], 'an empty string: the field is there');
  t.same(await uids('HEADER Received relay.example'), [40], 'a prefix field');
  t.same(await uids('HEADER x-spam-score ""'), [40]);
  t.same(await uids('HEADER Content-Language ""'), [], 'a part header is not the message header');
  t.same(await uids('HEADER MIME-Version 1.0'), [10, 20, 40, 50]);
  t.same(await uids(`HEADER From ${lit('andré')}`), [30], 'decoded words in a header field too');
});

t.test('BODY and TEXT: decoded text parts only; TEXT adds the header', async (t) => {
  t.same(await uids('BODY everything'), [20], 'quoted-printable soft break joined');
  t.same(await uids(`BODY ${lit('CAFÉ')}`), [20, 30, 40], 'UTF-8 QP, ISO-8859-1 8bit, and an attached message header');
  t.same(await uids(`BODY ${lit('crème')}`), [30]);
  t.same(await uids(`BODY ${lit('price: 5€')}`), [60], 'base64 and windows-1252 decoded');
  t.same(await uids('BODY "html offers"'), [40], 'inside message/rfc822');
  t.same(await uids('BODY "%PDF"'), [], 'an application/pdf attachment is not text');
  t.same(await uids('BODY lunch'), [10]);
  t.same(await uids('BODY Subject'), [40], 'the header of an attached message is body text');
  t.same(await uids('TEXT "Subject: Lunch"'), [10]);
  t.same(await uids('TEXT relay.example'), [40], 'the prefix is header');
  t.same(await uids('TEXT lunch'), [10]);
});

t.test('NOT, OR, AND nesting', async (t) => {
  t.same(await uids('NOT SEEN'), [20, 50, 60]);
  t.same(await uids('OR FLAGGED DELETED'), [20, 30]);
  t.same(await uids('OR (SEEN ANSWERED) BCC hidden'), [10, 60]);
  t.same(await uids('SEEN NOT OR DRAFT HEADER Received ""'), [10]);
  t.same(await uids('(UID 1:30 (NOT FLAGGED))'), [10, 30]);
});

t.test('cheap keys first: the body is read only for what they let through', async (t) => {
  reads = [];
  t.same(await uids('BODY offers FLAGGED'), [20]);
  t.same(
    reads.map((r) => r.uid),
    [20],
    'only the flagged message was read, although BODY comes first',
  );
  reads = [];
  await uids('SUBJECT lunch OR FROM x SEEN');
  t.same(reads, [], 'envelope keys read nothing');
  reads = [];
  t.same(await uids('HEADER x-spam-score "0.1" UID 40'), [40]);
  t.same(reads.length, 1);
  const nested = MESSAGES[3]!;
  t.equal(reads[0]!.end, nested.m.prefixLength + nested.m.tree.body.bodyStart, 'the header alone was read');
  reads = [];
  await uids('OR BODY zzz SEEN');
  t.same(
    reads.map((r) => r.uid),
    [20, 50, 60],
    'OR tries SEEN first and reads bodies only of the unseen',
  );
  t.ok(keyCost(criteria('SEEN')) < keyCost(criteria('FROM a')));
  t.ok(keyCost(criteria('FROM a')) < keyCost(criteria('HEADER X-A b')));
  t.ok(keyCost(criteria('HEADER X-A b')) < keyCost(criteria('TEXT b')));
});

t.test('positionFilter narrows to the UID and SEQ keys at the top level', async (t) => {
  const pass = positionFilter(criteria('UID 20:40 3:* SEEN'), 6, 60);
  t.same(
    MESSAGES.filter((f) => pass(f.m.seq, f.m.uid)).map((f) => f.m.uid),
    [30, 40],
  );
  const all = positionFilter(criteria('OR UID 1 SEEN'), 6, 60);
  t.ok(
    MESSAGES.every((f) => all(f.m.seq, f.m.uid)),
    'inside OR it decides nothing',
  );
});
