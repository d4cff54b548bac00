// control/compose.ts: the `from`/`to` address rules of sendEmail (docs/api.md §4.11, RFC 5321/5322) and the
// MIME message built from customer JSON (issue 5 item 2).
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import MimeNode from 'nodemailer/lib/mime-node';
import {
  assertWireSafe,
  checkedChunks,
  compileMessage,
  composeMessage,
  MAX_CONVERTED_HTML,
  serializeMime,
  isDeliverableAddress,
  normalizeMailbox,
  parseFrom,
  type ComposeInput,
} from '../../mail/compose.js';
import { STRING_CHUNK, WHOLE_STRING } from '../../mail/string-chunks.js';
import { randomOf, seeded } from '../helpers/seeded.js';

const INJECTIONS = [
  'a@b.com\r\nBcc: x@y.com',
  'a@b.com\nBcc: x@y.com',
  'a@b.com\rBcc: x@y.com',
  'Name\n <a@b.com>',
  'Name\r\n <a@b.com>',
  'a@b.com\u0000',
  '\u0000a@b.com',
  'Na\u0000me <a@b.com>',
  '"Name\r\nBcc: x@y.com" <a@b.com>',
  'Name <a@b.com\r\n>',
  'Name <a@b.com>\r\n',
];

t.test('parseFrom accepts the bare and the display-name forms', async (t) => {
  const ok: [string, string | null, string][] = [
    ['a@b.com', null, 'a@b.com'],
    ['  a@b.com\t', null, 'a@b.com'],
    ['Name <addr@example.com>', 'Name', 'addr@example.com'],
    ['Name<addr@example.com>', 'Name', 'addr@example.com'],
    ['<addr@example.com>', null, 'addr@example.com'],
    ['"" <addr@example.com>', null, 'addr@example.com'],
    ['"Quoted, Name" <addr@example.com>', 'Quoted, Name', 'addr@example.com'],
    ['"Say \\"hi\\" \\\\ bye" <a@example.com>', 'Say "hi" \\ bye', 'a@example.com'],
    ['"a <b> c" <a@example.com>', 'a <b> c', 'a@example.com'],
    ['Zoë <z@example.com>', 'Zoë', 'z@example.com'],
    ['Grüße aus Köln <news@example.com>', 'Grüße aus Köln', 'news@example.com'],
    ['山田 太郎 <taro@example.jp>', '山田 太郎', 'taro@example.jp'],
    ['Party \ud83c\udf89 <p@example.com>', 'Party \ud83c\udf89', 'p@example.com'],
    ['J. R.  Smith <jrs@example.com>', 'J. R. Smith', 'jrs@example.com'],
    ["Ann O'Neil <ann@example.com>", "Ann O'Neil", 'ann@example.com'],
    ['"Acme"   Billing <b@example.com>', 'Acme Billing', 'b@example.com'],
    ['Name <Mixed.Case+tag@Example.COM>', 'Name', 'Mixed.Case+tag@example.com'],
    ['first.last@sub.example.co.uk', null, 'first.last@sub.example.co.uk'],
    ["!#$%&'*+-/=?^_`{|}~@example.com", null, "!#$%&'*+-/=?^_`{|}~@example.com"],
    ['"john doe"@example.com', null, '"john doe"@example.com'],
    ['"a@b"@example.com', null, '"a@b"@example.com'],
    ['Name <"x\\"y"@example.com>', 'Name', '"x\\"y"@example.com'],
    ['z@Bücher.example', null, 'z@xn--bcher-kva.example'],
    [`${'l'.repeat(64)}@example.com`, null, `${'l'.repeat(64)}@example.com`],
  ];
  for (const [raw, name, address] of ok) {
    t.same(parseFrom(raw), { name, address }, JSON.stringify(raw));
  }
});

t.test('parseFrom refuses injections, lists, groups and invalid addresses', async (t) => {
  const long63 = 'a'.repeat(63);
  const bad = [
    ...INJECTIONS,
    '',
    '   ',
    'plain',
    'Name',
    '@example.com',
    'a@',
    'a@@example.com',
    'a@b@example.com',
    // more than one address, groups, comments, unquoted specials
    'a@b.com, c@d.com',
    'a@b.com c@d.com',
    'Name <a@b.com>, c@d.com',
    'Name <a@b.com> <c@d.com>',
    'Group: a@b.com;',
    'Group: a@b.com, c@d.com;',
    'Group:;',
    'Name <a@b.com>;',
    'Smith, John <a@b.com>',
    'Name (comment) <a@b.com>',
    'a@b.com (Name)',
    'Name <a@b.com> trailing',
    'Name a@b.com',
    'Name <a@b.com',
    'Name a@b.com>',
    'Name <<a@b.com>>',
    '"unterminated <a@b.com>',
    'Na\\me <a@b.com>',
    'Na@me <a@b.com>',
    'Name <>',
    'Name < a@b.com>',
    'Name <a@b.com >',
    // local part: RFC 5321 §4.1.2 dot-string or quoted string, ASCII, at most 64 octets
    '.a@example.com',
    'a.@example.com',
    'a..b@example.com',
    'a b@example.com',
    '"a"b@example.com',
    '""@example.com',
    '"a"."b"@example.com',
    '"a<b"@example.com',
    'zoë@example.com',
    'a(b)@example.com',
    'a,b@example.com',
    'a[b]@example.com',
    '"a\\\u00e9"@example.com',
    `${'l'.repeat(65)}@example.com`,
    // domain
    'a@example',
    'a@localhost',
    'a@.example.com',
    'a@example..com',
    'a@example.com.',
    'a@-ex.com',
    'a@ex-.com',
    'a@ex_ample.com',
    'a@exa mple.com',
    'a@1.2.3.4',
    'a@[1.2.3.4]',
    'a@[IPv6:::1]',
    'a@example.123',
    'a@xn--zz.example',
    `a@${'d'.repeat(64)}.com`,
    // RFC 5321 §4.5.3.1.2 / §4.5.3.1.3: domain 253, address 254
    `a@${[long63, long63, long63, 'a'.repeat(58), 'com'].join('.')}`, // domain of 254
    `a@${[long63, long63, long63, 'a'.repeat(57), 'com'].join('.')}`, // domain of 253, address of 255
    `${'l'.repeat(64)}@${[long63, long63, 'a'.repeat(58), 'com'].join('.')}`, // address of 255
    // RFC 5322 §2.1.1
    `${'N'.repeat(1000)} <a@b.com>`,
    // other controls have no place in a phrase or an address
    'Na\u0007me <a@b.com>',
    'a@b.com\u001b',
    'Na\u007fme <a@b.com>',
    // not text: a lone surrogate
    '\ud83d <a@b.com>',
    'x\ude00 <a@b.com>',
  ];
  for (const raw of bad) t.equal(parseFrom(raw), null, JSON.stringify(raw));
  // the limits sit exactly where the RFCs put them (checked so that the refusals above are not vacuous)
  const d252 = [long63, long63, long63, 'a'.repeat(56), 'com'].join('.');
  t.equal(`a@${d252}`.length, 254);
  t.ok(parseFrom(`a@${d252}`), 'a 254-octet address (with a 252-octet domain) is accepted');
  const d189 = [long63, long63, 'a'.repeat(57), 'com'].join('.');
  t.equal(`${'l'.repeat(64)}@${d189}`.length, 254);
  t.ok(parseFrom(`${'l'.repeat(64)}@${d189}`), 'a 254-octet address with a 64-octet local part is accepted');
  t.notOk(parseFrom(`${'l'.repeat(64)}@${d189}`.replace('@', 'x@')), 'a 65-octet local part is refused');
  const d190 = [long63, long63, 'a'.repeat(58), 'com'].join('.');
  t.equal(`${'l'.repeat(64)}@${d190}`.length, 255);
  t.notOk(parseFrom(`${'l'.repeat(64)}@${d190}`), 'a 255-octet address is refused');
  t.ok(parseFrom(`${'l'.repeat(63)}@${d190}`), 'one octet less is accepted');
});

t.test('isDeliverableAddress: a bare RFC 5321 mailbox only', async (t) => {
  for (const raw of [
    'a@b.com',
    'A.B+c@Example.COM',
    '"john doe"@example.com',
    'x@xn--bcher-kva.example',
    'user@mail.sub.example.org',
  ]) {
    t.equal(isDeliverableAddress(raw), true, JSON.stringify(raw));
  }
  const bad = [
    ...INJECTIONS,
    'Name <a@b.com>',
    '<a@b.com>',
    ' a@b.com',
    'a@b.com ',
    'a@b.com, c@d.com',
    'Group: a@b.com;',
    'a@b',
    'a@b.com.',
    'a@[127.0.0.1]',
    'a..b@c.com',
    'zoë@example.com',
    // a Unicode domain would go to RCPT TO and to MX lookup as is: refused, not converted
    'z@bücher.example',
    `${'l'.repeat(65)}@example.com`,
    '',
    'a@b.com\t',
  ];
  for (const raw of bad) t.equal(isDeliverableAddress(raw), false, JSON.stringify(raw));
  t.equal(normalizeMailbox('Mixed@Example.COM'), 'Mixed@example.com', 'the local part keeps its case (RFC 5321 §2.4)');
});

// ---- composeMessage ----

const BASE: ComposeInput = {
  from: { name: null, address: 'sender@example.com' },
  to: 'rcpt@example.org',
  subject: 'Hello',
  text: 'Plain body',
  messageId: '3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b@example.com',
  date: new Date(Date.UTC(2030, 0, 2, 3, 4, 5)),
};

function split(raw: Buffer): { head: string; body: string; headers: Map<string, string[]> } {
  const s = raw.toString('latin1');
  const cut = s.indexOf('\r\n\r\n');
  if (cut < 0) throw new Error('no header/body separator');
  const head = s.slice(0, cut);
  const headers = new Map<string, string[]>();
  // RFC 5322 §2.2.3: unfold (CRLF followed by WSP) before splitting into fields.
  for (const line of head.replace(/\r\n(?=[ \t])/g, '').split('\r\n')) {
    const colon = line.indexOf(':');
    const key = line.slice(0, colon).toLowerCase();
    headers.set(key, [...(headers.get(key) ?? []), line.slice(colon + 1).trim()]);
  }
  return { head, body: s.slice(cut + 4), headers };
}

function one(headers: Map<string, string[]>, key: string): string {
  const v = headers.get(key);
  if (!v || v.length !== 1) throw new Error(`expected exactly one ${key}, got ${JSON.stringify(v)}`);
  return v[0] as string;
}

// RFC 2047 decoding, enough for what MailComposer writes (UTF-8, Q or B).
function decodeWords(v: string): string {
  return v.replace(/=\?UTF-8\?([QB])\?([^?]*)\?=(?:\s+(?==\?))?/gi, (_m, enc: string, text: string) => {
    if (enc.toUpperCase() === 'B') return Buffer.from(text, 'base64').toString('utf8');
    const bytes = text
      .replace(/_/g, ' ')
      .replace(/=([0-9A-F]{2})/gi, (_x, h: string) => String.fromCharCode(parseInt(h, 16)));
    return Buffer.from(bytes, 'latin1').toString('utf8');
  });
}

function decodeQP(s: string): string {
  const bytes = s
    .replace(/=\r\n/g, '')
    .replace(/=([0-9A-F]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16)));
  return Buffer.from(bytes, 'latin1').toString('utf8');
}

function decodePart(headers: Map<string, string[]>, body: string): string {
  const cte = (headers.get('content-transfer-encoding')?.[0] ?? '7bit').toLowerCase();
  if (cte === 'base64') return Buffer.from(body.replace(/\s+/g, ''), 'base64').toString('utf8');
  if (cte === 'quoted-printable') return decodeQP(body);
  return body;
}

function assertWire(t: Test, raw: Buffer): void {
  const s = raw.toString('latin1');
  t.notMatch(s, /\r(?!\n)|(?<!\r)\n/, 'CRLF line endings only');
  const longest = Math.max(...s.split('\r\n').map((l) => Buffer.byteLength(l, 'latin1')));
  t.ok(longest <= 998, `no line over 998 octets (longest ${longest})`);
  t.notMatch(s, /[^\x00-\x7f]|\x00/, '7-bit, no NUL');
}

t.test("serializeMime writes exactly the bytes of nodemailer's own streaming build()", async (t) => {
  const bytes = (n: number) => randomBytes(n).toString('base64');
  const long = 'word '.repeat(400);
  const cases: [string, Partial<ComposeInput>][] = [
    ['text only', {}],
    ['html only', { text: undefined, html: '<p>Hi</p>' }],
    ['both', { text: 'plain', html: '<p>html</p>' }],
    ['non-ASCII text (quoted-printable)', { text: 'Grüße aus Köln, naïve café — ☃' }],
    [
      'mostly non-ASCII (base64)',
      { text: 'Привет мир, как дела? '.repeat(20), html: '<p>日本語のテキスト</p>'.repeat(30) },
    ],
    ['long ASCII lines', { text: `${long}\n${'x'.repeat(3000)}`, html: `<p>${'y'.repeat(5000)}</p>` }],
    ['trailing spaces and tabs', { text: 'end with space \nand tab\t\n\nlast ' }],
    ['bare CR and LF, CRLF', { text: 'a\rb\nc\r\nd', html: 'e\rf\ng' }],
    ['dots and From lines', { text: '.\n..\nFrom me\n.leading dot' }],
    ['= signs and soft-break edges', { text: `${'='.repeat(100)} ${'a='.repeat(60)}` }],
    ['random text', { text: bytes(3000), html: bytes(2000) }],
    [
      'non-ASCII subject and name, extra headers',
      {
        subject: 'Größe ☃ '.repeat(30),
        from: { name: 'Zoë "Support" Team', address: 'sender@example.com' },
        headers: {
          'List-Unsubscribe': '<https://example.com/u/1>',
          'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click',
        },
      },
    ],
    ['a very long ASCII subject word', { subject: 'S'.repeat(2000) }],
    [
      'To and Cc lists, named and bare, a long unsubscribe URL',
      {
        displayTo: [
          { name: 'Zoë', address: 'rcpt@example.org' },
          'b@example.org',
          { name: 'A, B', address: 'c@x.test' },
        ],
        cc: ['d@example.org', { name: 'Dee', address: 'e@example.org' }],
        headers: { 'List-Unsubscribe': `<https://example.com/u/${'t'.repeat(300)}?a=1&b=2>` },
      },
    ],
    [
      'sendEmail extras: Reply-To, extra headers, attachments, an inline image',
      {
        html: '<p><img src="cid:logo"></p>',
        replyTo: [
          { name: 'Zoë Support', address: 'help@example.com' },
          { name: null, address: 'b@example.org' },
        ],
        headers: { 'X-Note': 'Grüße', 'X-Campaign': 'c-1' },
        attachments: [
          { filename: 'Résumé été.pdf', content: randomBytes(5000) },
          { filename: 'logo.png', content: randomBytes(300), contentId: 'logo' },
          { filename: 'notes.txt', contentType: 'text/plain', content: Buffer.from('words') },
        ],
      },
    ],
  ];
  const encodings = new Set<string>();
  for (const [what, change] of cases) {
    const root = compileMessage({ ...BASE, ...change } as ComposeInput);
    const ours = serializeMime(root);
    const theirs = await root.build();
    t.equal(ours.toString('latin1'), theirs.toString('latin1'), what);
    for (const m of theirs.toString('latin1').matchAll(/^Content-Transfer-Encoding: (\S+)/gim))
      encodings.add(m[1]!.toLowerCase());
  }
  t.same(
    [...encodings].sort(),
    ['7bit', 'base64', 'quoted-printable'],
    'the cases cover every transfer encoding compose uses',
  );
  t.equal((await composeMessage(BASE)).length > 0, true, 'composeMessage goes through serializeMime');
});

t.test('a message over WHOLE_STRING characters, made and checked a chunk at a time, has the same bytes', async (t) => {
  // serializeMime joins a message's pieces once; composeMessage writes one this large a chunk at a time. Both against
  // build() where it wraps as we do: quoted-printable parts under 64 KiB each (past it build()'s stream wraps
  // otherwise, above) with CRLF line ends (an LF text is written as the same with CRLF, the test after next), a 7bit
  // text longer than a chunk (a piece written as it is), base64 attachments of a base64 chunk's size (45,600 octets)
  // and either side.
  // Then, against serializeMime alone, the bench's 1 MB text and html with LF line ends.
  const qp = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor = x.\r\n'.repeat(600);
  const lines = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n'.repeat(13_000);
  // The multipart boundary is random in each composition.
  const same = (raw: Buffer) => raw.toString('latin1').replace(/_NmP-[0-9a-f]+-Part/g, '_NmP-Part');
  const cases: [string, Partial<ComposeInput>, boolean][] = [
    [
      'two quoted-printable parts and an attachment',
      { text: qp, html: `<p>${qp}</p>`, attachments: [{ filename: 'a.bin', content: randomBytes(300_000) }] },
      true,
    ],
    ['a 7bit text longer than a chunk', { text: 'a short line of text\n'.repeat(8000) }, true],
    [
      "attachments of a base64 chunk's size, one octet either side, and two",
      {
        attachments: [45_599, 45_600, 45_601, 91_200].map((n, i) => ({
          filename: `f${i}.bin`,
          content: randomBytes(n),
        })),
      },
      true,
    ],
    ['a 1 MB text and html with LF line ends', { text: lines, html: `<p>${lines}</p>` }, false],
  ];
  for (const [what, change, againstBuild] of cases) {
    const m = { ...BASE, ...change } as ComposeInput;
    const root = compileMessage(m);
    const whole = serializeMime(root);
    t.ok(whole.length > WHOLE_STRING, `${what}: ${whole.length} octets`);
    if (againstBuild) t.equal(whole.toString('latin1'), (await root.build()).toString('latin1'), `${what}: build()'s`);
    const chunked = await composeMessage(m);
    t.ok(same(chunked) === same(whole), `${what}: composeMessage writes serializeMime's bytes`);
    assertWire(t, chunked);
  }
});

t.test("serializeMime writes build()'s bytes for random contents in every encoding, lone CR and LF too", async (t) => {
  // compileMessage never gives a part a lone CR or LF; serializeMime must still write what build() writes
  // (LeWindows: every LF a CRLF), which it looks for only in the headers and in text that is not encoded.
  // Contents stay under 64 KiB and do not end in a space or tab: there build()'s streaming qp Encoder wraps
  // differently from qp.wrap(qp.encode(x), 76), which serializeMime writes (it re-wraps at each 64 KiB slice,
  // and wraps a last line ending in held-back whitespace on its own).
  const pieces = [
    'a',
    'Lorem ipsum dolor sit amet, ',
    ' ',
    '\t',
    '=',
    '\x7f',
    '\r\n',
    '\r\n',
    '\n',
    '\r',
    '\n\n',
    ' \r\n',
    '\r\r\n',
    'é',
    '€',
    '😀',
    'x'.repeat(90),
  ];
  const rnd = seeded(11);
  const encodings = new Set<string>();
  let mismatches = 0;
  for (let i = 0; i < 400; i++) {
    const root = compileMessage({ ...BASE, text: 'short', html: '<p>short</p>' });
    for (const node of root.childNodes) {
      node.setContent(randomOf(rnd, pieces, 40).replace(/[ \t]+$/, ''));
      // What MimeNode chooses for the content, or an encoding by choice.
      const chosen = [undefined, undefined, 'quoted-printable', 'base64'][Math.floor(rnd() * 4)];
      if (chosen) node.setHeader('Content-Transfer-Encoding', chosen);
      if (node.content) encodings.add(String(node.getTransferEncoding()));
    }
    const ours = serializeMime(root).toString('latin1');
    const theirs = (await root.build()).toString('latin1');
    if (ours !== theirs && mismatches++ < 3) t.equal(ours, theirs, `case ${i}`);
  }
  t.equal(mismatches, 0, '400 random messages');
  t.same([...encodings].sort(), ['7bit', 'base64', 'quoted-printable'], 'every encoding met');
});

t.test('a text or html with LF line ends composes to the bytes of the same with CRLF', async (t) => {
  // A JSON body's text keeps its LFs through composition and is written as CRLF piece by piece (no converted copy);
  // the text with CRLF goes the way the test above proves against nodemailer's build(). Every encoding, and texts at
  // the length past which nodemailer counts any text as long (128 kB, with the CRs a converted text would hold).
  const pieces = ['a', 'Lorem ipsum dolor sit amet, ', ' ', '\t', '=', '\x7f', '\n', '\n\n', ' \n', 'é', '€', '😀'];
  const longLine = 'x'.repeat(90);
  const rnd = seeded(13);
  // The multipart boundary is random in each composition.
  const same = (raw: Buffer) => raw.toString('latin1').replace(/_NmP-[0-9a-f]+-Part/g, '_NmP-Part');
  const texts = [
    ...Array.from({ length: 300 }, (_, i) => randomOf(rnd, i % 3 ? pieces : [...pieces, longLine], 120)),
    'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n'.repeat(1300),
    // 128 kB of short lines with the CRs, under it without them (7bit: no line over 76 in the LF text).
    'short line\n'.repeat(12_000),
    'short line\n'.repeat(11_000),
  ].filter((s) => s.trim() !== '');
  let mismatches = 0;
  for (const [i, lf] of texts.entries()) {
    const crlf = lf.replaceAll('\n', '\r\n');
    const pairs = [
      [{ text: lf }, { text: crlf }],
      [
        { text: undefined, html: `<p>${lf}</p>` },
        { text: undefined, html: `<p>${crlf}</p>` },
      ],
      [
        { text: lf, html: `<div>${lf}</div>` },
        { text: crlf, html: `<div>${crlf}</div>` },
      ],
    ] as const;
    for (const [a, b] of pairs) {
      const ours = same(await composeMessage({ ...BASE, ...a }));
      if (ours !== same(await composeMessage({ ...BASE, ...b })) && mismatches++ < 3)
        t.fail(`text ${i} differs: ${JSON.stringify(lf.slice(0, 200))}`);
    }
  }
  t.equal(mismatches, 0, `${texts.length} texts, three ways each`);
});

t.test('MimeNode keeps isPlainText as `_isPlainText`, which compose reads (nodemailer internals)', async (t) => {
  // serializeMime hands it to quotedPrintable, whose plain path depends on its meaning: without it the
  // output is the same, only slower, so this is where its disappearance shows.
  const cases: [string, boolean][] = [
    ['plain words\r\n', true],
    ['tab\tand DEL\x7f and =', true],
    ['Grüße', false],
    ['a\u0001b', false],
  ];
  for (const [text, plain] of cases) {
    const node = new MimeNode('text/plain').setContent(text);
    t.equal((node as unknown as { _isPlainText?: unknown })._isPlainText, plain, JSON.stringify(text));
  }
  const root = compileMessage({ ...BASE, text: 'x '.repeat(100), html: '<p>Grüße</p>' });
  t.same(
    root.childNodes.map((n) => (n as unknown as { _isPlainText?: unknown })._isPlainText),
    [true, false],
    "compose's text and html parts have it",
  );
});

t.test(
  "compose's parts carry the flags and encoding a MimeNode given the same text would (internals it sets)",
  async (t) => {
    // compileMessage hands MailComposer placeholders and sets each part's text, `_isPlainText` and `_hasLongLines`
    // itself: a MimeNode given the text by setContent is the reference for all three and for the encoding.
    const texts = [
      'short plain words',
      `${'word '.repeat(30)}\r\nnext`,
      'Grüße\r\n',
      'a\u0001b',
      'tab\tand DEL\x7f',
      'x'.repeat(200 * 1024),
      'Lorem ipsum dolor sit amet.\r\n'.repeat(5000),
    ];
    for (const text of texts) {
      const root = compileMessage({ ...BASE, text, html: `<p>${text}</p>` });
      for (const node of root.childNodes) {
        const reference = new MimeNode(String(node.getHeader('Content-Type'))).setContent(String(node.content));
        const flags = (n: MimeNode) => {
          const f = n as unknown as { _isPlainText?: unknown; _hasLongLines?: unknown };
          return [f._isPlainText, f._hasLongLines, n.getTransferEncoding()];
        };
        t.same(flags(node), flags(reference), `${String(node.getHeader('Content-Type'))}: ${text.slice(0, 30)}`);
      }
      t.equal(String(root.childNodes[0]!.content).length, crlfLength(text), 'the text part holds the text');
    }
  },
);
const crlfLength = (s: string) => s.replaceAll('\r\n', '\n').replaceAll('\n', '\r\n').length;

t.test('assertWireSafe refuses what a reference check refuses: 8-bit, NUL, lone CR or LF, long lines', async (t) => {
  const reference = (s: string) =>
    /[^\x01-\x7f]/.test(s) || /\r(?!\n)|(?<!\r)\n/.test(s) || s.split('\r\n').some((l) => l.length > 998);
  // Alone, and with its latin1 octets (as composeMessage calls it): the two must agree.
  const refusesWith = (s: string, latin1?: Buffer) => {
    try {
      assertWireSafe(s, latin1);
      return false;
    } catch {
      return true;
    }
  };
  const refuses = (s: string) => {
    const alone = refusesWith(s);
    return alone === refusesWith(s, Buffer.from(s, 'latin1')) ? alone : null;
  };
  // Code units above 0xff whose low octet is ASCII ('Ł' is 0x141), which a latin1 Buffer would turn into 'A'.
  const pieces = [
    'a',
    'x'.repeat(300),
    '\r\n',
    '\r\n',
    '\r\n',
    '\r',
    '\n',
    '\0',
    'é',
    'Ł',
    '\ud800',
    '😀',
    '\x7f',
    '\x01',
  ];
  const rnd = seeded(12);
  let mismatches = 0;
  const outcomes = new Set<boolean | null>();
  for (let i = 0; i < 20000; i++) {
    const s = randomOf(rnd, i % 2 ? pieces.slice(0, 5) : pieces, 12);
    outcomes.add(refuses(s));
    if (refuses(s) !== reference(s) && mismatches++ < 3) t.fail(`differs for ${JSON.stringify(s)}`);
  }
  t.equal(mismatches, 0, '20000 random texts');
  t.same([...outcomes].sort(), [false, true], 'both passed and refused');
  for (const s of ['Ł', '\u0100', 'a\0b', `${'a'.repeat(999)}\r\n`, 'a'.repeat(999), 'a\rb', 'a\nb', '\ud83d'])
    t.ok(refuses(s), JSON.stringify(s.slice(0, 20)));
  for (const s of ['', `${'a'.repeat(998)}\r\n${'b'.repeat(998)}`, 'a\r\n\r\n\t\x7f'])
    t.equal(refuses(s), false, JSON.stringify(s.slice(0, 20)));
});

t.test("checkedChunks refuses what assertWireSafe of the whole refuses, and writes the whole's octets", async (t) => {
  // Random pieces, in chunks of a few characters (cut after a piece ending in an LF once a chunk is full: between a
  // piece ending in a CR and one starting with its LF never), and of the STRING_CHUNK composeMessage uses.
  const pieces = ['a', 'x'.repeat(300), 'y'.repeat(700), '\r\n', '\r\n', '=\r\n', '\r', '\n', 'b\n', '\0', 'é', 'Ł'];
  const rnd = seeded(21);
  const outcome = (f: () => Buffer): Buffer | 'refused' => {
    try {
      return f();
    } catch {
      return 'refused';
    }
  };
  let mismatches = 0;
  const seen = new Set<string>();
  for (let i = 0; i < 20000; i++) {
    const list = Array.from({ length: 1 + Math.floor(rnd() * 12) }, () =>
      randomOf(rnd, i % 2 ? pieces.slice(0, 6) : pieces, 1 + Math.floor(rnd() * 3)),
    );
    const text = list.join('');
    const whole = outcome(() => (assertWireSafe(text), Buffer.from(text, 'latin1')));
    for (const chunk of [1 + Math.floor(rnd() * 20), STRING_CHUNK]) {
      const chunked = outcome(() => checkedChunks(list, text.length, chunk));
      seen.add(whole === 'refused' ? 'refused' : 'passed');
      const agree = whole === 'refused' ? chunked === 'refused' : chunked !== 'refused' && chunked.equals(whole);
      if (!agree && mismatches++ < 3) t.fail(`differs for ${JSON.stringify(list)} in chunks of ${chunk}`);
    }
  }
  t.equal(mismatches, 0, '20000 random lists of pieces');
  t.same([...seen].sort(), ['passed', 'refused'], 'both passed and refused');
});

t.test("each text part's pinned transfer encoding is the one MimeNode chooses for its content", async (t) => {
  const texts = [
    'short',
    'x'.repeat(77),
    'Grüße aus Köln',
    'Привет мир, как дела? '.repeat(20),
    '1'.repeat(100),
    `${'a '.repeat(70000)}`,
    'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n'.repeat(50),
  ];
  const encodings = new Set<string>();
  for (const text of texts) {
    for (const change of [{ text }, { text: undefined, html: text }, { text, html: `<p>${text}</p>` }]) {
      const root = compileMessage({ ...BASE, ...change } as ComposeInput);
      const parts = [root, ...root.childNodes];
      for (const node of parts.filter((n) => typeof n.content === 'string' && n.content)) {
        const fresh = new MimeNode(String(node.getHeader('Content-Type'))).setContent(node.content as string);
        const pinned = node.getTransferEncoding();
        encodings.add(String(pinned));
        t.equal(pinned, fresh.getTransferEncoding(), `${JSON.stringify(text.slice(0, 30))}`);
      }
    }
  }
  t.same([...encodings].sort(), ['7bit', 'base64', 'quoted-printable']);
});

t.test('text only: a single text/plain part with the standard headers', async (t) => {
  const raw = await composeMessage(BASE);
  t.ok(Buffer.isBuffer(raw));
  assertWire(t, raw);
  const { headers, body } = split(raw);
  t.equal(one(headers, 'from'), 'sender@example.com');
  t.equal(one(headers, 'to'), '<rcpt@example.org>', 'a bare address in angle brackets');
  t.equal(one(headers, 'subject'), 'Hello');
  t.equal(one(headers, 'message-id'), '<3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b@example.com>');
  t.equal(one(headers, 'date'), 'Wed, 02 Jan 2030 03:04:05 +0000', 'RFC 5322 §3.3 date-time from input.date');
  t.equal(one(headers, 'mime-version'), '1.0');
  t.match(one(headers, 'content-type'), /^text\/plain; charset=utf-8$/i);
  t.equal(headers.has('bcc'), false, 'no Bcc');
  t.equal(headers.has('x-mailer'), false, 'no X-Mailer');
  t.equal(decodePart(headers, body).replace(/\r\n$/, ''), 'Plain body');
});

/** The two parts of a multipart/alternative message, decoded. */
function alternativeParts(raw: Buffer): { type: string; content: string }[] {
  const { headers, body } = split(raw);
  const boundary = /boundary="?([^";]+)"?$/i.exec(one(headers, 'content-type'))?.[1] ?? '';
  const parts = body.split(new RegExp(`\r\n--${boundary}(?:--)?\r\n|^--${boundary}\r\n`)).slice(1, 3);
  return parts.map((p) => {
    const ph = split(Buffer.from(p, 'latin1'));
    return { type: one(ph.headers, 'content-type'), content: decodePart(ph.headers, ph.body) };
  });
}

t.test('html only: a text/plain alternative is made from the html (RFC 2046 §5.1.4)', async (t) => {
  const { text: _text, ...rest } = BASE;
  const html = '<p>Hi <b>there</b></p><img src="https://t.test/pixel.gif"><a href="https://x.test/a">docs</a>';
  const raw = await composeMessage({ ...rest, html });
  assertWire(t, raw);
  t.match(one(split(raw).headers, 'content-type'), /^multipart\/alternative;/i);
  const [text, htmlPart] = alternativeParts(raw);
  t.match(text?.type, /^text\/plain; charset=utf-8$/i, 'text first');
  t.match(text?.content, /^Hi there\r\n\r\ndocs \[https:\/\/x\.test\/a\]/, 'the words, links with their URL');
  t.notMatch(text?.content, /pixel|<p>/, 'no tags, no images');
  t.equal(htmlPart?.content, html, 'the html as given');
});

// The converter keeps no state between messages: what one message holds (a list, a table, preformatted text, a long
// paragraph) must not shape the next one's text. Its rules, element by element: test/mail/html-alternative.test.ts.
t.test('html only: the text alternative wraps at 76 and is the same whatever came before', async (t) => {
  const { text: _text, ...rest } = BASE;
  const words = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt. ';
  const a = `<h1>Welcome</h1><p>${words.repeat(4)}</p><ul><li>one</li><li>two</li></ul>`;
  const b = `<pre>  keep   this\n    as is</pre><table><tr><td>x</td><td>y</td></tr></table><ol><li>first</li></ol>`;
  const textOf = async (html: string) => alternativeParts(await composeMessage({ ...rest, html }))[0]!.content;
  const first = await textOf(a);
  t.match(first, /^WELCOME\r\n\r\nLorem ipsum/, 'headings and paragraphs');
  t.match(first, /\r\n \* one\r\n \* two$/, 'list items');
  const lines = first.split('\r\n');
  t.ok(lines.length > 6, 'the paragraph is wrapped');
  t.ok(Math.max(...lines.map((l) => l.length)) <= 76, 'no line over 76 characters');
  t.match(await textOf(b), /^ {2}keep {3}this\r\n {4}as is/, 'preformatted text kept');
  t.equal(await textOf(a), first, 'the same text after another message');
});

// htmlparser2's cost grows with the square of the nesting (mail/html-nesting.ts). Html nested past the limit, and html
// over MAX_CONVERTED_HTML, get the plain text alternative of mail/html-text.ts.
t.test('html only, nested 100,000 deep or over MAX_CONVERTED_HTML: a plainer text alternative', async (t) => {
  const { text: _text, ...rest } = BASE;
  const deep = `${'<div>'.repeat(100_000)}<p>Deep &amp; down</p>${'</div>'.repeat(100_000)}`;
  const line = 'Lorem ipsum dolor sit amet, <b>consectetur</b> adipiscing elit, sed do eiusmod tempor incididunt.';
  // The text alternative would wrap each paragraph at 76 columns; the plainer one leaves lines whole.
  const large = `<p>${line}</p>\n`.repeat(12_000);
  t.ok(large.length > MAX_CONVERTED_HTML);
  for (const [name, html, words] of [
    ['deep', deep, /^Deep & down$/],
    [
      'large',
      large,
      /^Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt\.\r\n\r\nL/,
    ],
  ] as const) {
    const raw = await composeMessage({ ...rest, html });
    assertWire(t, raw);
    const [text, htmlPart] = alternativeParts(raw);
    t.match(text?.content, words, `${name}: the words`);
    t.equal(htmlPart?.content, html.replaceAll('\n', '\r\n'), `${name}: the html as given`);
  }
});

t.test('text and html: multipart/alternative, text first, boundaries well formed', async (t) => {
  const raw = await composeMessage({ ...BASE, text: 'Grüße, plain', html: '<p>Grüße, <b>html</b></p>' });
  assertWire(t, raw);
  const { headers, body } = split(raw);
  const ct = one(headers, 'content-type');
  const m = /^multipart\/alternative;\s*boundary="?([^";]+)"?$/i.exec(ct);
  t.ok(m, `multipart/alternative with a boundary: ${ct}`);
  const boundary = (m as RegExpExecArray)[1] as string;
  t.ok(boundary.length <= 70, 'RFC 2046 §5.1.1: boundary at most 70 characters');
  t.notOk(
    headers.has('content-transfer-encoding') &&
      !/^(7bit|8bit|binary)$/i.test(one(headers, 'content-transfer-encoding')),
    'RFC 2045 §6.4: a multipart entity is not encoded',
  );
  const lines = body.split('\r\n');
  const delims = lines.map((l, i) => [l, i] as const).filter(([l]) => l === `--${boundary}` || l === `--${boundary}--`);
  t.same(
    delims.map(([l]) => l),
    [`--${boundary}`, `--${boundary}`, `--${boundary}--`],
    'two parts and a close delimiter',
  );
  t.notOk(
    body.replace(new RegExp(`^--${boundary}(--)?$`, 'gm'), '').includes(boundary),
    'the boundary appears nowhere else',
  );
  const parts = body.split(new RegExp(`\r\n--${boundary}(?:--)?\r\n|^--${boundary}\r\n`)).slice(1, 3);
  t.equal(parts.length, 2);
  const decoded = parts.map((p) => {
    const ph = split(Buffer.from(p, 'latin1'));
    return { type: one(ph.headers, 'content-type'), content: decodePart(ph.headers, ph.body) };
  });
  t.match(
    decoded[0]?.type,
    /^text\/plain; charset=utf-8$/i,
    'text first (RFC 2046 §5.1.4: in increasing faithfulness)',
  );
  t.match(decoded[1]?.type, /^text\/html; charset=utf-8$/i, 'html last');
  t.equal(decoded[0]?.content, 'Grüße, plain');
  t.equal(decoded[1]?.content, '<p>Grüße, <b>html</b></p>');
});

t.test('non-ASCII subject and display name become RFC 2047 encoded words', async (t) => {
  const raw = await composeMessage({
    ...BASE,
    from: { name: 'Grüße Team', address: 'sender@example.com' },
    subject: 'Grüße aus Köln',
  });
  assertWire(t, raw);
  const { head, headers } = split(raw);
  t.notMatch(head, /Grüße|Gr\xc3\xbc/, 'no raw non-ASCII in the header');
  const subject = one(headers, 'subject');
  t.match(subject, /^=\?UTF-8\?[QB]\?/i);
  t.equal(decodeWords(subject), 'Grüße aus Köln');
  const from = one(headers, 'from');
  t.match(from, /^=\?UTF-8\?[QB]\?.*\?= <sender@example\.com>$/i);
  t.equal(decodeWords(from), 'Grüße Team <sender@example.com>');
});

t.test('an ASCII display name is quoted when it holds specials, left bare when it does not', async (t) => {
  let { headers } = split(
    await composeMessage({ ...BASE, from: { name: 'Quoted, "Name"', address: 'sender@example.com' } }),
  );
  t.equal(one(headers, 'from'), '"Quoted, \\"Name\\"" <sender@example.com>');
  ({ headers } = split(
    await composeMessage({ ...BASE, from: { name: 'Acme Billing', address: 'sender@example.com' } }),
  ));
  t.equal(one(headers, 'from'), 'Acme Billing <sender@example.com>');
  ({ headers } = split(await composeMessage({ ...BASE, from: { name: '', address: 'sender@example.com' } })));
  t.equal(one(headers, 'from'), 'sender@example.com', 'an empty name is no name');
});

t.test('what parseFrom returns composes to a From that parses back the same', async (t) => {
  for (const raw of [
    'Zoë <z@example.com>',
    '"Quoted, Name" <q@example.com>',
    '"Say \\"hi\\"" <s@example.com>',
    'a@b.com',
  ]) {
    const from = parseFrom(raw);
    if (!from) throw new Error(raw);
    const { headers } = split(await composeMessage({ ...BASE, from }));
    const back = parseFrom(decodeWords(one(headers, 'from')));
    t.same(back, from, raw);
  }
});

t.test('no line over 998 octets: a 5000-character single-line html, a long word in the subject', async (t) => {
  const html = `<html><body>${'<a href="https://example.com/x">link</a>'.repeat(130)}</body></html>`;
  t.ok(html.length > 5000 && !html.includes('\n'));
  for (const body of [html, 'x'.repeat(5000), 'ü'.repeat(5000), `${'a'.repeat(997)}\n${'b'.repeat(999)}`]) {
    const raw = await composeMessage({ ...BASE, text: 'short', html: body });
    assertWire(t, raw);
    const { body: parts } = split(raw);
    t.match(parts, /^Content-Transfer-Encoding: (quoted-printable|base64)\r$/m, 'long lines are transfer-encoded');
    t.equal(
      alternativeParts(raw)[1]?.content.replace(/\r\n$/, ''),
      body.replace(/\n/g, '\r\n'),
      'and decode back to the body',
    );
  }
  const both = await composeMessage({ ...BASE, text: 'y'.repeat(5000), html });
  assertWire(t, both);
  const subject = `Order ${'X'.repeat(1200)} shipped`;
  const raw = await composeMessage({ ...BASE, subject });
  assertWire(t, raw);
  t.equal(decodeWords(one(split(raw).headers, 'subject')), subject, 'the subject survives as encoded words');
  const shortWords = `${'word '.repeat(400)}end`;
  const folded = await composeMessage({ ...BASE, subject: shortWords });
  assertWire(t, folded);
  t.equal(one(split(folded).headers, 'subject'), shortWords, 'an ordinary long subject is folded, not encoded');
});

t.test('bodies get CRLF line endings, bare CR and LF included', async (t) => {
  const raw = await composeMessage({ ...BASE, text: 'one\ntwo\rthree\r\nfour' });
  assertWire(t, raw);
  t.equal(decodePart(split(raw).headers, split(raw).body).replace(/\r\n$/, ''), 'one\r\ntwo\r\nthree\r\nfour');
});

t.test('extra headers are added as given; those compose owns are refused', async (t) => {
  const raw = await composeMessage({
    ...BASE,
    headers: { 'List-Unsubscribe': '<https://example.com/u/1>', 'X-Entity-Ref': 'abc' },
  });
  const { headers } = split(raw);
  t.equal(one(headers, 'list-unsubscribe'), '<https://example.com/u/1>');
  t.equal(one(headers, 'x-entity-ref'), 'abc');
  for (const name of [
    'Bcc',
    'bcc',
    'From',
    'Subject',
    'Message-ID',
    'Date',
    'MIME-Version',
    'Content-Type',
    'Content-Transfer-Encoding',
    'Cc',
    'Reply-To',
    'Return-Path',
  ]) {
    await t.rejects(composeMessage({ ...BASE, headers: { [name]: 'x@y.com' } }), { message: /set by compose/ }, name);
  }
  for (const name of ['X Bad', 'X:Bad', 'X-Bad\r\nBcc', '', 'Zoë']) {
    await t.rejects(
      composeMessage({ ...BASE, headers: { [name]: 'v' } }),
      { message: /field name/ },
      JSON.stringify(name),
    );
  }
});

t.test('To and Cc: a bare address in angle brackets, a named one as before', async (t) => {
  const raw = await composeMessage({
    ...BASE,
    displayTo: ['rcpt@example.org', { name: 'Zoë Ö', address: 'z@example.org' }, { name: 'Ann', address: 'a@x.test' }],
    cc: ['c@example.org'],
  });
  assertWire(t, raw);
  const { headers } = split(raw);
  const [bare, zoe, ann] = one(headers, 'to').split(/,\s*/);
  t.equal(bare, '<rcpt@example.org>');
  t.equal(decodeWords(zoe ?? ''), 'Zoë Ö <z@example.org>');
  t.equal(ann, 'Ann <a@x.test>');
  t.equal(one(headers, 'cc'), '<c@example.org>');
  t.equal(one(headers, 'from'), 'sender@example.com', 'From unchanged');
});

t.test('List-Unsubscribe and List-Unsubscribe-Post are written verbatim: never folded or encoded', async (t) => {
  const url = `<https://example.com/unsubscribe/${'t'.repeat(200)}?list=news&u=42>`;
  const raw = await composeMessage({
    ...BASE,
    headers: { 'List-Unsubscribe': url, 'List-Unsubscribe-Post': 'List-Unsubscribe=One-Click' },
  });
  assertWire(t, raw);
  const { head } = split(raw);
  t.match(head, new RegExp(`^List-Unsubscribe: ${url.replace(/[?.]/g, '\\$&')}\r$`, 'm'), 'one line');
  t.match(head, /^List-Unsubscribe-Post: List-Unsubscribe=One-Click\r$/m);
  // Two URLs (RFC 2369 §2) stay on the one line too.
  const two = '<https://example.com/u/1>, <mailto:u@example.com?subject=unsubscribe>';
  t.match(
    split(await composeMessage({ ...BASE, headers: { 'List-Unsubscribe': two } })).head,
    `List-Unsubscribe: ${two}\r`,
  );
  await t.rejects(
    composeMessage({ ...BASE, headers: { 'List-Unsubscribe': '<https://exämple.test/u>' } }),
    { message: /printable ASCII/ },
    'a non-ASCII value is refused, not encoded',
  );
  await t.rejects(
    composeMessage({ ...BASE, headers: { 'List-Unsubscribe': `<https://example.com/${'u'.repeat(980)}>` } }),
    { message: /one line/ },
    'a value that cannot fit one line is refused, not folded',
  );
});

t.test('sendEmail extras: Reply-To, content types guessed or given, inline parts (RFC 2387, RFC 2392)', async (t) => {
  const out = (
    await composeMessage({
      ...BASE,
      html: '<img src="cid:logo@x">',
      replyTo: [{ name: 'Zoë', address: 'z@example.com' }],
      attachments: [
        { filename: 'logo.png', content: Buffer.from('png'), contentId: 'logo@x' },
        { filename: 'a.PDF', content: Buffer.from('pdf') },
        { filename: 'noext', content: Buffer.from('x') },
        { filename: 'fwd.eml', content: Buffer.from('From: a@b\r\n\r\nx') },
        { filename: 'given', contentType: 'Text/CSV', content: Buffer.from('a,b') },
        { filename: 'sneaky', contentType: 'message/rfc822', content: Buffer.from('x') },
      ],
    })
  ).toString('latin1');
  t.match(out, /\r\nReply-To: =\?UTF-8\?Q\?Zo=C3=AB\?= <z@example\.com>\r\n/, 'Reply-To, the name encoded');
  t.match(out, /Content-Type: multipart\/related; type="text\/html"/);
  t.match(out, /Content-Type: image\/png; name=logo\.png\r\nContent-ID: <logo@x>\r\n/);
  t.match(out, /Content-Disposition: inline; filename=logo\.png/);
  t.match(out, /Content-Type: application\/pdf; name=a\.PDF/, 'guessed from the extension, any case');
  t.match(out, /Content-Type: application\/octet-stream; name=noext/, 'no extension: octet-stream');
  t.match(out, /Content-Type: application\/octet-stream; name=fwd\.eml/, 'message/* is never base64: bytes');
  t.match(out, /Content-Type: text\/csv; name=given/, 'a given type, lower-cased');
  t.match(out, /Content-Type: application\/octet-stream; name=sneaky/);
  t.notMatch(out, /message\/rfc822/);
  const invalid = (a: object) => composeMessage({ ...BASE, attachments: [a] } as unknown as ComposeInput);
  await t.rejects(invalid({ filename: 'a', content: Buffer.from('x'), contentId: '<a>' }), /content id/);
  await t.rejects(
    composeMessage({ ...BASE, replyTo: [{ name: 'x', address: 'not an address' }] }),
    /reply-to holds an invalid mailbox/,
  );
  await t.rejects(composeMessage({ ...BASE, replyTo: [{ name: 'x\r\nBcc: y', address: 'a@b.com' }] }), /CR, LF/);
});

t.test('CR, LF or NUL in any header-bound value throws, never reaches the output', async (t) => {
  const evil = ['\r\nBcc: x@y.com', '\nBcc: x@y.com', '\rBcc: x@y.com', '\u0000'];
  for (const e of evil) {
    const cases: [string, ComposeInput][] = [
      ['subject', { ...BASE, subject: `Hi${e}` }],
      ['from name', { ...BASE, from: { name: `Name${e}`, address: 'sender@example.com' } }],
      ['from address', { ...BASE, from: { name: null, address: `sender@example.com${e}` } }],
      ['to', { ...BASE, to: `rcpt@example.org${e}` }],
      ['messageId', { ...BASE, messageId: `${BASE.messageId}${e}` }],
      ['header value', { ...BASE, headers: { 'X-Tag': `v${e}` } }],
    ];
    for (const [field, input] of cases) {
      await t.rejects(composeMessage(input), { message: /CR, LF or NUL/ }, `${field} ${JSON.stringify(e)}`);
    }
  }
});

t.test('invalid addresses, message ids and dates throw', async (t) => {
  await t.rejects(composeMessage({ ...BASE, to: 'Name <rcpt@example.org>' }), { message: /to is not/ });
  await t.rejects(composeMessage({ ...BASE, to: 'a@b.com, c@d.com' }), { message: /to is not/ });
  await t.rejects(composeMessage({ ...BASE, from: { name: null, address: 'not-an-address' } }), {
    message: /from is not/,
  });
  await t.rejects(composeMessage({ ...BASE, messageId: 'no-at-sign' }), { message: /messageId/ });
  await t.rejects(
    composeMessage({ ...BASE, messageId: '<a@b.com>' }),
    { message: /messageId/ },
    'without angle brackets',
  );
  await t.rejects(composeMessage({ ...BASE, messageId: 'a b@c.com' }), { message: /messageId/ });
  await t.rejects(composeMessage({ ...BASE, date: new Date('nope') }), { message: /date/ });
});

t.test('no file or URL access: a path is text, an object body is refused', async (t) => {
  const raw = await composeMessage({ ...BASE, text: '/etc/passwd', html: 'file:///etc/passwd' });
  const s = raw.toString('latin1');
  t.notMatch(s, /root:/, 'the file was not read');
  t.match(s, /\r\n\/etc\/passwd\r\n/, 'the path stays literal text');
  t.match(s, /\r\nfile:\/\/\/etc\/passwd\r\n/);
  // A JavaScript caller (or a template engine returning an object) cannot smuggle in a content
  // descriptor: MailComposer would read { path } from disk if file access were on.
  const smuggled = { ...BASE, text: { path: '/etc/passwd' } as unknown as string };
  await t.rejects(composeMessage(smuggled), { message: /text must be a string/ });
  const smuggledHtml = { ...BASE, html: { href: 'http://127.0.0.1:1/' } as unknown as string };
  await t.rejects(composeMessage(smuggledHtml), { message: /html must be a string/ });
  // The webmail's attachments are Buffers with a name and a type: one given as a path is refused, never read.
  const withAttachments = { ...BASE, attachments: [{ path: '/etc/passwd' }] } as unknown as ComposeInput;
  await t.rejects(composeMessage(withAttachments), { message: /attachment/ });
  const named = { filename: 'passwd', contentType: 'text/plain', path: '/etc/passwd' };
  await t.rejects(composeMessage({ ...BASE, attachments: [named] } as unknown as ComposeInput), {
    message: /must be a Buffer/,
  });
  const real = { filename: 'a.txt', contentType: 'text/plain', content: Buffer.from('words') };
  const out = (await composeMessage({ ...BASE, attachments: [real] })).toString('latin1');
  t.match(out, /multipart\/mixed/);
  t.match(out, new RegExp(Buffer.from('words').toString('base64')), 'the Buffer, in base64');
  t.notMatch(out, /root:/);
});

t.test('MailComposer itself refuses a path when file access is disabled (the option we rely on)', async (t) => {
  const { default: MailComposer } = await import('nodemailer/lib/mail-composer');
  const node = new MailComposer({
    text: { path: '/etc/passwd' },
    disableFileAccess: true,
    disableUrlAccess: true,
  }).compile();
  await t.rejects(node.build(), 'file access is refused');
});
