// imap/response.ts: strings quoted or sent as literals as RFC 3501 §4.3 demands, NIL, lists, status
// responses with their codes, continuations, dates and FETCH section labels; the ResponseBuffer FETCH
// writes its many responses into.
import t from 'tap';
import {
  atom,
  continuation,
  encodeValue,
  formatDateTime,
  literal,
  ResponseBuffer,
  sectionLabel,
  statusResponse,
  untagged,
  writeUntagged,
} from '../../imap/response.js';

const s = (b: Buffer) => b.toString('utf8');

t.test('strings: quoted when RFC 3501 §4.3 allows it, literal otherwise', async (t) => {
  t.equal(s(encodeValue('hello world')), '"hello world"');
  t.equal(s(encodeValue('')), '""');
  t.equal(s(encodeValue('say "hi" \\ bye')), '"say \\"hi\\" \\\\ bye"');
  t.equal(s(encodeValue('käse')), '{5}\r\nkäse', '8-bit goes as a literal');
  t.equal(s(encodeValue('two\r\nlines')), '{10}\r\ntwo\r\nlines', 'CR/LF go as a literal');
  t.equal(s(encodeValue('bare\nLF')), '{7}\r\nbare\nLF');
  t.equal(s(encodeValue('x'.repeat(2000))).slice(0, 8), '{2000}\r\n', 'very long strings too');
  t.equal(s(encodeValue(null)), 'NIL');
  t.equal(s(encodeValue(42)), '42');
  t.equal(s(encodeValue(12121230045n)), '12121230045');
  t.equal(s(encodeValue(atom('\\Seen'))), '\\Seen');
  t.equal(s(encodeValue(literal('abc'))), '{3}\r\nabc');
  t.equal(s(encodeValue([])), '()');
  t.equal(s(encodeValue([atom('\\Seen'), ['a', null], 3])), '(\\Seen ("a" NIL) 3)');
});

t.test('untagged data, status responses and continuations', async (t) => {
  t.equal(
    s(untagged([12, atom('FETCH'), [atom('FLAGS'), [atom('\\Seen')], atom('UID'), 4]])),
    '* 12 FETCH (FLAGS (\\Seen) UID 4)\r\n',
  );
  t.equal(
    s(untagged([atom('LIST'), [atom('\\HasNoChildren')], '/', 'INBOX'])),
    '* LIST (\\HasNoChildren) "/" "INBOX"\r\n',
  );
  t.equal(s(statusResponse('a1', 'OK', 'LOGIN completed')), 'a1 OK LOGIN completed\r\n');
  t.equal(s(statusResponse(null, 'BYE', 'bye')), '* BYE bye\r\n');
  t.equal(s(statusResponse('a', 'NO', 'a\r\nb')), 'a NO a b\r\n', 'no CR/LF inside a text');
  t.equal(s(continuation()), '+ Ready\r\n');
  t.equal(s(continuation('idling')), '+ idling\r\n');
});

t.test('response codes', async (t) => {
  const line = (code: Parameters<typeof statusResponse>[3]) => s(statusResponse('a', 'OK', 'x', code));
  t.equal(line({ code: 'UIDNEXT', value: 4392 }), 'a OK [UIDNEXT 4392] x\r\n');
  t.equal(line({ code: 'UIDVALIDITY', value: 3857529045 }), 'a OK [UIDVALIDITY 3857529045] x\r\n');
  t.equal(line({ code: 'UNSEEN', value: 12 }), 'a OK [UNSEEN 12] x\r\n');
  t.equal(line({ code: 'HIGHESTMODSEQ', value: 715194045007n }), 'a OK [HIGHESTMODSEQ 715194045007] x\r\n');
  t.equal(
    line({ code: 'PERMANENTFLAGS', flags: ['\\Deleted', '\\Seen', '\\*'] }),
    'a OK [PERMANENTFLAGS (\\Deleted \\Seen \\*)] x\r\n',
  );
  t.equal(line({ code: 'PERMANENTFLAGS', flags: [] }), 'a OK [PERMANENTFLAGS ()] x\r\n');
  t.equal(line({ code: 'CAPABILITY', capabilities: ['IMAP4rev1', 'IDLE'] }), 'a OK [CAPABILITY IMAP4rev1 IDLE] x\r\n');
  t.equal(line({ code: 'BADCHARSET', charsets: ['UTF-8'] }), 'a OK [BADCHARSET (UTF-8)] x\r\n');
  // RFC 4315 §3 examples.
  t.equal(line({ code: 'APPENDUID', uidValidity: 38505, uids: [3955] }), 'a OK [APPENDUID 38505 3955] x\r\n');
  t.equal(
    line({ code: 'COPYUID', uidValidity: 38505, source: [304, 319, 320], dest: [3956, 3957, 3958] }),
    'a OK [COPYUID 38505 304,319:320 3956:3958] x\r\n',
  );
  t.equal(line({ code: 'MODIFIED', set: [7, 9] }), 'a OK [MODIFIED 7,9] x\r\n');
  for (const code of ['OVERQUOTA', 'AUTHENTICATIONFAILED', 'TRYCREATE', 'ALERT', 'READ-WRITE', 'NOMODSEQ'] as const) {
    t.equal(line({ code }), `a OK [${code}] x\r\n`);
  }
});

t.test('date-time (RFC 3501 §9) and BODY[...] labels (§7.4.2)', async (t) => {
  const d = new Date('1996-07-17T09:44:25Z');
  t.equal(formatDateTime(d, -420), '17-Jul-1996 02:44:25 -0700');
  t.equal(formatDateTime(d), '17-Jul-1996 09:44:25 +0000');
  t.equal(formatDateTime(new Date('2024-02-01T00:00:00Z'), 330), ' 1-Feb-2024 05:30:00 +0530', 'date-day-fixed');
  t.equal(
    sectionLabel({ part: [1, 2], text: 'HEADER.FIELDS', fields: ['SUBJECT', 'FROM'] }, { offset: 0 }),
    'BODY[1.2.HEADER.FIELDS (SUBJECT FROM)]<0>',
  );
  t.equal(sectionLabel({ part: [], text: null, fields: null }, null), 'BODY[]');
  t.equal(sectionLabel({ part: [3], text: 'MIME', fields: null }, null), 'BODY[3.MIME]');
  t.equal(
    sectionLabel({ part: [], text: 'HEADER.FIELDS', fields: ['X(odd)'] }, null),
    'BODY[HEADER.FIELDS ("X(odd)")]',
  );
});

t.test('ResponseBuffer: the same octets as untagged, small literals copied in, large ones passed on', async (t) => {
  const out = new ResponseBuffer();
  const small = Buffer.from('Subject: hi\r\n\r\n');
  const large = Buffer.alloc(5000, 0x61);
  const values = [
    [1, atom('FETCH'), [atom('BODY[HEADER]'), literal(small), atom('FLAGS'), [atom('\\Seen')]]],
    [2, atom('FETCH'), [atom('BODY[]'), literal(large), atom('ENVELOPE'), ['käse', null]]],
    [3, atom('FETCH'), [atom('UID'), 9]],
  ] as const;
  for (const v of values) writeUntagged(out, v);
  t.ok(out.length > 5000);
  const chunks = out.take();
  t.equal(out.length, 0, 'nothing left once taken');
  t.equal(Buffer.concat(chunks).toString('latin1'), Buffer.concat(values.map((v) => untagged(v))).toString('latin1'));
  t.equal(chunks.length, 3, 'the text around the large literal, and the literal itself');
  t.equal(chunks[1], large, "the large literal is the caller's buffer, not a copy");
  t.same(out.take(), [], 'nothing written, nothing taken');
});

t.test('ResponseBuffer: alloc lends memory until recycle; taken text stays as it was', async (t) => {
  const out = new ResponseBuffer();
  const body = out.alloc(6000).fill(0x62);
  writeUntagged(out, [1, atom('FETCH'), [atom('BODY[]'), literal(body)]]);
  const first = out.take();
  t.equal(first[1]!.buffer, body.buffer, 'a body read into lent memory is sent from there');
  writeUntagged(out, [2, atom('FETCH'), [atom('UID'), 2]]);
  const second = out.take();
  t.equal(Buffer.concat(first).toString('latin1'), `* 1 FETCH (BODY[] {6000}\r\n${'b'.repeat(6000)})\r\n`);
  t.equal(Buffer.concat(second).toString(), '* 2 FETCH (UID 2)\r\n', 'written after the part taken');
  t.ok(out.held > 0);
  writeUntagged(out, [3, atom('FETCH'), [atom('UID'), 3]]);
  t.throws(() => out.recycle(), /not taken/, 'no recycling under responses not yet taken');
  out.take();
  out.recycle();
  t.equal(out.held, 0);
  const again = out.alloc(10).buffer;
  t.ok(again === body.buffer || again === first[0]!.buffer, 'the same memory lent again');
  t.not(out.alloc(300 * 1024).buffer, body.buffer, 'larger than a block: a buffer of its own');
});
