// mail/mime-tree.ts: the structure stored beside each message for IMAP FETCH and the webmail list,
// on the hand-made messages of test/fixtures/mime/, with offsets checked by slicing the raw bytes.
import t, { type Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { Readable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import {
  MAX_DEPTH,
  MAX_ENTITIES,
  type MimeEntity,
  type MimeTree,
  findEntity,
  parseMimeTree,
  parseMimeTreeStream,
  sectionRange,
  transferDecode,
} from '../../mail/mime-tree.js';

const DIR = fileURLToPath(new URL('../fixtures/mime/', import.meta.url));
const fixture = (name: string): Buffer => readFileSync(DIR + name);
const slice = (raw: Buffer, r: { start: number; end: number } | null): string =>
  r ? raw.subarray(r.start, r.end).toString('latin1') : '<none>';
const bodyOf = (raw: Buffer, e: MimeEntity | null): string =>
  e ? raw.subarray(e.bodyStart, e.bodyEnd).toString() : '';

/** Every entity, in the order of the message (Python's Message.walk() order). */
function walk(e: MimeEntity, out: MimeEntity[] = []): MimeEntity[] {
  out.push(e);
  for (const c of e.children ?? []) walk(c, out);
  if (e.message) walk(e.message.body, out);
  return out;
}

/** Offsets nest and stay inside the message; a part's header ends where its body starts. */
function checkRanges(t: Test, tree: MimeTree, raw: Buffer): void {
  const bad: string[] = [];
  const inside = (e: MimeEntity, lo: number, hi: number): void => {
    if (!(lo <= e.headerStart && e.headerStart <= e.bodyStart && e.bodyStart <= e.bodyEnd && e.bodyEnd <= hi))
      bad.push(`${e.part}: ${e.headerStart} ${e.bodyStart} ${e.bodyEnd} outside ${lo}..${hi}`);
    if (e.size !== e.bodyEnd - e.bodyStart) bad.push(`${e.part}: size`);
    for (const c of e.children ?? []) inside(c, e.bodyStart, e.bodyEnd);
    if (e.message) inside(e.message.body, e.bodyStart, e.bodyEnd);
  };
  inside(tree.body, 0, raw.length);
  t.same(bad, [], 'offsets nest');
  t.equal(tree.size, raw.length, 'RFC822.SIZE');
  t.equal(tree.body.bodyEnd, raw.length, 'the message body runs to the end');
  t.same(JSON.parse(JSON.stringify(tree)), tree, 'JSON round trip');
}

t.test('every fixture: ranges nest, JSON round-trips, the stream parse agrees byte by byte', async (t) => {
  for (const name of readdirSync(DIR).filter((f) => f.endsWith('.eml'))) {
    const raw = fixture(name);
    const tree = parseMimeTree(raw);
    t.test(name, async (t) => {
      checkRanges(t, tree, raw);
      t.same(await parseMimeTreeStream(Readable.from([raw])), tree, 'one chunk');
      const bytes = Array.from({ length: raw.length }, (_, i) => raw.subarray(i, i + 1));
      t.same(await parseMimeTreeStream(Readable.from(bytes)), tree, 'one byte at a time');
      const sevens = Array.from({ length: Math.ceil(raw.length / 7) }, (_, i) => raw.subarray(i * 7, i * 7 + 7));
      t.same(await parseMimeTreeStream(Readable.from(sevens)), tree, 'seven bytes at a time');
    });
  }
});

t.test('simple text: envelope, sections, lines', async (t) => {
  const raw = fixture('simple.eml');
  const tree = parseMimeTree(raw);
  const e = tree.envelope;
  t.equal(e.date, 'Tue, 4 Jun 2024 09:30:00 +0200 (CEST)', 'raw Date');
  t.equal(tree.date, '2024-06-04T07:30:00.000Z', 'normalised Date');
  t.equal(e.subject, 'Lunch on Thursday?', 'unfolded: CRLF removed, the folding space kept (RFC 5322 §2.2.3)');
  t.same(e.from, [{ name: 'Alice Example', adl: null, mailbox: 'alice', host: 'example.org' }]);
  t.same(e.sender, e.from, 'Sender defaults to From');
  t.same(e.replyTo, e.from, 'Reply-To defaults to From');
  t.same(e.to, [
    { name: null, adl: null, mailbox: 'bob', host: 'example.com' },
    { name: 'Carol, Q.', adl: null, mailbox: 'carol', host: 'example.net' },
  ]);
  t.equal(e.cc, null);
  t.equal(e.bcc, null);
  t.equal(e.inReplyTo, '<plan-7@example.com>');
  t.equal(e.messageId, '<lunch-1@example.org>');
  t.equal(tree.messageId, 'lunch-1@example.org');
  t.equal(tree.preview, 'Hi Bob, are we still on for lunch on Thursday? Alice');
  t.equal(tree.hasAttachments, false);

  const b = tree.body;
  t.equal(b.part, '1', 'a single-part body is part 1');
  t.match(b, { type: 'text', subtype: 'plain', params: [['charset', 'us-ascii']], lines: 5, encoding: null });
  t.ok(slice(raw, sectionRange(tree, [], 'HEADER')).endsWith('Content-Type: text/plain; charset=us-ascii\r\n\r\n'));
  t.ok(slice(raw, sectionRange(tree, [], 'HEADER')).startsWith('Return-Path: '));
  const text = 'Hi Bob,\r\n\r\nare we still on for lunch on Thursday?\r\n\r\nAlice\r\n';
  t.equal(slice(raw, sectionRange(tree, [], 'TEXT')), text);
  t.equal(slice(raw, sectionRange(tree, [1], null)), text, 'BODY[1] of a single-part message is its text');
  t.equal(slice(raw, sectionRange(tree, [1], 'MIME')), slice(raw, sectionRange(tree, [], 'HEADER')));
  t.equal(slice(raw, sectionRange(tree, [], null)), raw.toString('latin1'));
  t.equal(sectionRange(tree, [2], null), null, 'no part 2');
  t.equal(sectionRange(tree, [1], 'TEXT'), null, 'TEXT after a number needs message/rfc822');
  t.equal(sectionRange(tree, [], 'MIME'), null, 'MIME needs a part number');
});

t.test('multipart/alternative: preamble, QP preview with a soft line break', async (t) => {
  const raw = fixture('alternative.eml');
  const tree = parseMimeTree(raw);
  t.equal(tree.body.part, null, 'a multipart message root has no number');
  t.same(
    tree.body.children!.map((c) => [c.part, c.type, c.subtype, c.encoding, c.lines]),
    [
      ['1', 'text', 'plain', 'quoted-printable', 2],
      ['2', 'text', 'html', 'quoted-printable', 1],
    ],
  );
  t.equal(
    bodyOf(raw, findEntity(tree, [1])),
    'Caf=C3=A9 offers this week: 20% off every=\r\nthing.',
    'no trailing CRLF',
  );
  t.equal(
    slice(raw, sectionRange(tree, [2], 'MIME')),
    'Content-Type: text/html; charset=utf-8\r\n' + 'Content-Transfer-Encoding: quoted-printable\r\n\r\n',
  );
  t.ok(slice(raw, sectionRange(tree, [], 'TEXT')).startsWith('This is a multi-part message'), 'TEXT has the preamble');
  t.equal(tree.preview, 'Café offers this week: 20% off everything.');
});

t.test('multipart/mixed with attachments: every BODYSTRUCTURE field', async (t) => {
  const raw = fixture('mixed-attachments.eml');
  const tree = parseMimeTree(raw);
  t.same(
    walk(tree.body).map((e) => `${e.part} ${e.type}/${e.subtype}`),
    ['null multipart/mixed', '1 multipart/related', '1.1 text/html', '1.2 image/png', '2 application/pdf'],
  );
  const png = findEntity(tree, [1, 2])!;
  t.match(png, {
    id: '<chart@example.org>',
    disposition: { type: 'inline', params: [] },
    encoding: 'base64',
    filename: 'chart.png',
  });
  t.same(Buffer.from(bodyOf(raw, png), 'base64'), Buffer.from(Array.from({ length: 200 }, (_, i) => i)));
  const pdf = findEntity(tree, [2])!;
  t.same(pdf.params, [['name', 'report.pdf']]);
  t.same(
    pdf.disposition,
    {
      type: 'attachment',
      params: [
        ['filename*', "utf-8''R%C3%A9sum%C3%A9%20of%20June.pdf"],
        ['size', '777'],
      ],
    },
    'RFC 2231 continuations joined, still encoded, as IMAP returns them',
  );
  t.equal(pdf.filename, 'Résumé of June.pdf', 'decoded for display');
  t.equal(pdf.description, 'The report');
  t.same(pdf.language, ['en', 'fr']);
  t.equal(pdf.location, 'https://example.org/report.pdf');
  t.equal(pdf.md5, 'Q2hlY2sgSW50ZWdyaXR5IQ==');
  const original = Buffer.concat([Buffer.from('%PDF-1.4\n'), ...Array(3).fill(Buffer.from([...Array(256).keys()]))]);
  t.same(Buffer.from(bodyOf(raw, pdf), 'base64'), original, 'the body decodes to the attached file');
  t.equal(pdf.size, pdf.bodyEnd - pdf.bodyStart);
  t.equal(tree.hasAttachments, true);
  t.equal(tree.preview, 'See the chart:', 'HTML stripped when there is no text/plain');
  const related = findEntity(tree, [1])!;
  t.ok(bodyOf(raw, related).endsWith('--rel--\r\n'), 'a multipart body keeps its epilogue (here an empty line)');
});

t.test('nested message/rfc822: own envelope and structure, HEADER/TEXT/MIME of the part', async (t) => {
  const raw = fixture('nested-rfc822.eml');
  const tree = parseMimeTree(raw);
  t.same(
    walk(tree.body).map((e) => `${e.part} ${e.type}/${e.subtype}`),
    [
      'null multipart/mixed',
      '1 text/plain',
      '2 message/rfc822',
      'null multipart/alternative',
      '2.1 text/plain',
      '2.2 text/html',
      '3 message/rfc822',
      '3.1 text/plain',
    ],
  );
  const fwd = findEntity(tree, [2])!;
  t.equal(fwd.disposition?.type, 'attachment', 'parsed although marked attachment');
  t.equal(fwd.message!.envelope.subject, '=?utf-8?q?Caf=C3=A9?= Offers', 'raw for IMAP');
  t.equal(fwd.message!.envelope.messageId, '<offers@shop.example>');
  t.same(fwd.message!.envelope.from, [{ name: null, adl: null, mailbox: 'news', host: 'shop.example' }]);
  t.equal(fwd.lines, 17);
  t.ok(slice(raw, sectionRange(tree, [2], null)).startsWith('From: news@shop.example\r\n'), 'BODY[2]');
  t.ok(slice(raw, sectionRange(tree, [2], null)).endsWith('inner epilogue\r\n'), 'BODY[2] ends before the CRLF');
  t.equal(
    slice(raw, sectionRange(tree, [2], 'MIME')),
    'Content-Type: message/rfc822\r\nContent-Disposition: attachment; filename="offers.eml"\r\n\r\n',
  );
  t.ok(slice(raw, sectionRange(tree, [2], 'HEADER')).endsWith('boundary="inner"\r\n\r\n'), 'BODY[2.HEADER]');
  t.ok(slice(raw, sectionRange(tree, [2], 'TEXT')).startsWith('--inner\r\n'), 'BODY[2.TEXT]');
  t.equal(bodyOf(raw, findEntity(tree, [2, 2])), '<b>HTML offers</b>');
  t.equal(slice(raw, sectionRange(tree, [3], 'HEADER')), 'Subject: single part inside\r\n\r\n');
  t.equal(slice(raw, sectionRange(tree, [3], 'TEXT')), 'Just text.');
  t.equal(slice(raw, sectionRange(tree, [3, 1], null)), 'Just text.', 'BODY[3.1]: the single part inside 3');
  t.equal(findEntity(tree, [3, 2]), null);
  t.equal(sectionRange(tree, [1], 'HEADER'), null, 'HEADER of a text part does not exist');
  t.equal(tree.preview, 'See below.');
  t.equal(tree.hasAttachments, true);
});

t.test('encoded words, groups, raw 8-bit headers', async (t) => {
  const raw = fixture('encoded-words.eml');
  const tree = parseMimeTree(raw);
  const e = tree.envelope;
  t.equal(e.subject, '=?UTF-8?B?8J+Ys8Kg?= =?UTF-8?B?w6k=?= =?UTF-8?Q?t=C3=A9?= plain (not a comment)', 'raw');
  t.equal(tree.display.subject, '😳\u00a0été plain (not a comment)', 'decoded, space between words dropped');
  t.same(e.from, [{ name: '=?ISO-8859-1?Q?Andr=E9?= Pirard', adl: null, mailbox: 'PIRARD', host: 'vm1.ulg.ac.be' }]);
  t.same(tree.display.from, [{ name: 'André Pirard', address: 'PIRARD@vm1.ulg.ac.be' }]);
  t.same(
    e.to,
    [
      { name: null, adl: null, mailbox: 'undisclosed-recipients', host: null },
      { name: null, adl: null, mailbox: null, host: null },
    ],
    'an empty group: start and end markers (RFC 3501 §7.4.2)',
  );
  t.same(e.cc, [
    { name: null, adl: null, mailbox: 'Friends', host: null },
    { name: '=?UTF-8?B?w4lsb2lzZQ==?=', adl: null, mailbox: 'eloise', host: 'example.fr' },
    { name: 'Zoë Raw', adl: null, mailbox: 'zoe', host: 'example.de' },
    { name: null, adl: null, mailbox: null, host: null },
    { name: null, adl: null, mailbox: 'plain', host: 'example.com' },
  ]);
  t.same(
    tree.display.cc.map((a) => a.name),
    ['Éloise', 'Zoë Raw', ''],
  );
  t.same(e.sender, e.from, 'a Sender with no address in it counts as absent');
  t.same(e.replyTo, [{ name: null, adl: null, mailbox: 'list', host: 'example.org' }]);
  t.equal(tree.date, '2024-06-07T10:00:00.000Z', 'two-digit year (RFC 5322 §4.3)');
  t.equal(tree.preview, 'Café crème', 'ISO-8859-1 body decoded');
});

t.test('bare LF line endings', async (t) => {
  const raw = fixture('bare-lf.eml');
  const tree = parseMimeTree(raw);
  t.equal(bodyOf(raw, findEntity(tree, [1])), 'line one\nline two\n', 'the LF before the delimiter is not the part’s');
  t.equal(findEntity(tree, [1])!.lines, 2);
  t.equal(bodyOf(raw, findEntity(tree, [2])), 'a,b\n1,2');
  t.equal(findEntity(tree, [2])!.lines, 2, 'a last line without its line break counts');
  t.equal(slice(raw, sectionRange(tree, [2], 'MIME')), 'Content-Type: text/csv; name=data.csv\n\n');
  t.equal(tree.hasAttachments, true, 'a named part is an attachment');
});

t.test('malformed: header-only part, multipart without boundary or parts, bad type, no close delimiter', async (t) => {
  const raw = fixture('malformed.eml');
  const tree = parseMimeTree(raw);
  t.same(
    tree.body.children!.map((c) => [c.part, `${c.type}/${c.subtype}`, c.fallback ?? null, bodyOf(raw, c)]),
    [
      ['1', 'text/plain', null, ''],
      ['2', 'text/plain', 'no-parts', 'no boundary parameter here'],
      ['3', 'text/plain', null, 'invalid type'],
      ['4', 'text/plain', 'no-parts', 'the inner boundary never comes'],
      ['5', 'text/plain', null, 'the close delimiter is missing\r\n'],
    ],
  );
  t.equal(slice(raw, sectionRange(tree, [1], 'MIME')), 'Content-Type: text/plain\r\n', 'header ended by a delimiter');
  t.equal(tree.messageId, null);
  t.equal(tree.date, null);

  const noHeaders = fixture('no-headers.eml');
  const bare = parseMimeTree(noHeaders);
  t.equal(bare.body.bodyStart, 2, 'an empty header block');
  t.equal(bare.envelope.from, null);
  t.equal(bare.preview, 'A message that starts with its body.');

  for (const junk of [
    '',
    '\r\n',
    'no header end',
    'Content-Type: multipart/mixed; boundary=x\r\n\r\n--x',
    '--\n--\n',
  ]) {
    const tree = parseMimeTree(Buffer.from(junk));
    t.equal(tree.size, junk.length, JSON.stringify(junk));
  }
});

t.test('depth is capped at MAX_DEPTH, the bytes below stay in the capped part', async (t) => {
  const raw = fixture('deep-nest.eml');
  const tree = parseMimeTree(raw);
  const all = walk(tree.body);
  let deepest = tree.body;
  let depth = 0;
  for (let e = tree.body; e.children; e = e.children[1]!) [deepest, depth] = [e.children[1]!, depth + 1];
  t.equal(depth, MAX_DEPTH - 1, 'the deepest entity sits at depth 31 (the message itself is 0)');
  t.match(deepest, { type: 'application', subtype: 'octet-stream', fallback: 'depth' });
  t.ok(bodyOf(raw, deepest).includes('bottom'), 'the rest of the nest is its body');
  t.equal(all.length, 2 * MAX_DEPTH - 1);
  t.equal(
    deepest.part,
    Array(MAX_DEPTH - 1)
      .fill('2')
      .join('.'),
  );
  t.equal(findEntity(tree, [2, 2, 1])!.part, '2.2.1');
  t.equal(bodyOf(raw, findEntity(tree, [2, 2, 1])), 'level 2');
});

t.test(`at most ${MAX_ENTITIES} entities; the parts past it stay in their parent's body`, async (t) => {
  let s = 'Content-Type: multipart/mixed; boundary=n\r\n\r\n';
  for (let i = 0; i < 1200; i++) s += `--n\r\nContent-Type: text/plain\r\n\r\npart ${i}\r\n`;
  s += '--n--\r\n';
  const raw = Buffer.from(s);
  const tree = parseMimeTree(raw);
  t.equal(tree.body.children!.length, MAX_ENTITIES - 1);
  const last = tree.body.children!.at(-1)!;
  t.equal(bodyOf(raw, last), `part ${MAX_ENTITIES - 2}`, 'the last listed part ends at the next delimiter');
  t.equal(tree.body.bodyEnd, raw.length);
  checkRanges(t, tree, raw);
});

t.test('a 25 MB message streamed in 64 KiB chunks', async (t) => {
  const line = Buffer.from('QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNkZWZnaGlqa2xtbm9wcXJzdHV2d3h5ejAxMjM0\r\n');
  const head = Buffer.from(
    'Subject: big\r\nContent-Type: multipart/mixed; boundary=big\r\n\r\n--big\r\n\r\nhello\r\n--big\r\n' +
      'Content-Type: application/octet-stream\r\nContent-Transfer-Encoding: base64\r\n\r\n',
  );
  const tail = Buffer.from('\r\n--big--\r\n');
  const lines = Math.ceil((25 * 2 ** 20) / line.length);
  async function* source(): AsyncGenerator<Buffer> {
    yield head;
    const block = Buffer.concat(Array(800).fill(line)); // 62.4 KiB
    let left = lines;
    while (left > 0) {
      const n = Math.min(800, left);
      yield n === 800 ? block : block.subarray(0, n * line.length);
      left -= n;
    }
    yield tail;
  }
  const tree = await parseMimeTreeStream(Readable.from(source()));
  const size = head.length + lines * line.length + tail.length;
  t.equal(tree.size, size);
  const blob = findEntity(tree, [2])!;
  t.equal(blob.size, lines * line.length, 'the CRLF of the tail belongs to the delimiter');
  t.equal(blob.lines, lines);
  t.equal(tree.preview, 'hello');
});

t.test('Python’s email module as an independent oracle: same parts in the same order, same bodies', async (t) => {
  // compat32 hands payloads back with LF line endings: both sides are compared that way.
  const lf = (b: Buffer): string =>
    Buffer.from(b.toString('latin1').replace(/\r\n/g, '\n'), 'latin1').toString('base64');
  const script = String.raw`
import sys, json, base64, email, email.policy
out = []
for path in sys.argv[1:]:
    with open(path, 'rb') as f:
        msg = email.message_from_binary_file(f, policy=email.policy.compat32)
    parts = []
    for p in msg.walk():
        body = None
        if not p.is_multipart():
            body = p.get_payload(decode=False).encode('ascii', 'surrogateescape').replace(b'\r\n', b'\n')
            body = base64.b64encode(body).decode()
        parts.append([p.get_content_type(), body])
    out.append(parts)
print(json.dumps(out))
`;
  const names = ['simple.eml', 'alternative.eml', 'mixed-attachments.eml', 'nested-rfc822.eml', 'bare-lf.eml'];
  const python = JSON.parse(
    execFileSync('python3', ['-c', script, ...names.map((n) => DIR + n)], { encoding: 'utf8' }),
  ) as [string, string | null][][];
  names.forEach((name, i) => {
    const raw = fixture(name);
    const ours = walk(parseMimeTree(raw).body).map((e) => [
      `${e.type}/${e.subtype}`,
      e.children || e.message ? null : lf(raw.subarray(e.bodyStart, e.bodyEnd)),
    ]);
    t.same(ours, python[i], name);
  });
});

t.test(
  'quoted-printable: octets, soft breaks after CRLF or LF, a stray "=" passed through (RFC 2045 §6.7)',
  async (t) => {
    const decoded = transferDecode(Buffer.from('caf=C3=a9 =3D x=\r\ny=\nz =zz =4'), 'quoted-printable');
    t.equal(decoded.toString('utf8'), 'café = xyz =zz =4');
    t.equal(transferDecode(Buffer.from('aGk='), 'base64').toString(), 'hi');
  },
);
