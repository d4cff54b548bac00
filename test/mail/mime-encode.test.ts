// mail/mime-encode.ts: our quoted-printable and base64 writers give nodemailer's bytes (qp.wrap(qp.encode(x), 76),
// base64.wrap(base64.encode(x), 76)), valid RFC 2045 lines that decode back to the text, and the transfer
// encoding nodemailer's MimeNode would choose (docs/decisions.md #59).
import t, { type Test } from 'tap';
import { createRequire } from 'node:module';
import { isStringOneByteRepresentation } from 'node:v8';
import { encode as qpEncode, wrap as qpWrap } from 'nodemailer/lib/qp';
import { encode as b64Encode, wrap as b64Wrap } from 'nodemailer/lib/base64';
import MimeNode from 'nodemailer/lib/mime-node';
import { hasLongerLines, isPlainText } from 'nodemailer/lib/mime-funcs';
import {
  BASE64_CHUNK,
  base64Lines,
  base64Pieces,
  hasLongerLines as ourHasLongerLines,
  isAsciiText,
  isPlainText as ourIsPlainText,
  quotedPrintable,
  quotedPrintableBytes,
  quotedPrintableLines,
  quotedPrintableParts,
  quotedPrintableSegments,
  textTransferEncoding,
} from '../../mail/mime-encode.js';
import { randomOf, seeded } from '../helpers/seeded.js';

const require = createRequire(import.meta.url);
const libqp = require('libqp') as { decode(s: string): Buffer };

const theirsQp = (s: string) => qpWrap(qpEncode(s), 76);

// Pieces that reach every rule: long lines, trailing whitespace, "=" and "." at line starts, UTF-8 of 2, 3
// and 4 octets (and a lone surrogate), controls, bare CR and LF, words near the 76th column.
const PIECES = [
  'a',
  'Z',
  '0',
  ' ',
  ' ',
  '\t',
  '.',
  ',',
  '!',
  '?',
  '=',
  '\r\n',
  '\r\n',
  '\n',
  '\r',
  'é',
  '€',
  '😀',
  '\ud800',
  '\udc00x',
  '\u0000',
  '\x7f',
  'x'.repeat(80),
  'y'.repeat(70),
  ' '.repeat(5),
  '=\r\n',
  '.\r\n',
  '\r\n.',
  '\r\n=',
  'ééééééé',
  '日本語',
  'word ',
];

// Plain text by mime-funcs' isPlainText (ASCII, no C0 control but TAB, CR and LF): what quotedPrintable's
// `plain` path takes. "=" and DEL, blanks before line breaks and at the end, lines of every length around the
// soft-break rules (75 and 76 before a CRLF, 150), breaks at spaces and at escapes.
const PLAIN_PIECES = [
  'a',
  'Z',
  '0',
  ' ',
  ' ',
  '\t',
  '.',
  ',',
  '!',
  '=',
  '==',
  '=3D',
  '\x7f',
  '\r\n',
  '\r\n',
  '\r\n',
  ' \r\n',
  '\t\r\n',
  '  \r\n',
  '=\r\n',
  '\x7f\r\n',
  '\r\n.',
  '\n',
  '\r',
  'x'.repeat(80),
  'y'.repeat(70),
  'w'.repeat(75),
  'v'.repeat(76),
  'u'.repeat(150),
  ' '.repeat(5),
  'word ',
  'words, more words. ',
];

const BARE_CR_OR_LF = /\r(?!\n)|(?<!\r)\n/;

/** RFC 2045 §6.7: lines of at most 76 characters, CRLF between them, soft breaks as a final "=". */
function assertValidQp(t: Test, qp: string, what: string): boolean {
  const lines = qp.split('\r\n');
  const bad = lines.find((l) => l.length > 76 || /[^\t\x20-\x7e]/.test(l) || /[ \t]$/.test(l));
  if (bad !== undefined) {
    t.fail(`${what}: line ${JSON.stringify(bad)}`);
    return false;
  }
  return true;
}

t.test('quotedPrintable writes the bytes of nodemailer for random text, CRLF-only or not', async (t) => {
  const rnd = seeded(1);
  let mismatches = 0;
  for (let i = 0; i < 20000; i++) {
    let s = randomOf(rnd, PIECES, 300);
    if (i % 2) s = s.replace(/\r\n|\r|\n/g, '\r\n');
    const ours = quotedPrintable(s);
    const lines = quotedPrintableLines(s, isPlainText(s));
    if (ours !== theirsQp(s) || quotedPrintableBytes(s) !== ours || lines.text !== ours) {
      if (mismatches++ < 3) t.fail(`differs for ${JSON.stringify(s)}`);
      continue;
    }
    if (lines.crlfOnly && BARE_CR_OR_LF.test(lines.text)) {
      if (mismatches++ < 3) t.fail(`said CRLF-only, is not: ${JSON.stringify(s)}`);
    }
    // Lone CR/LF are written literally by both (compose never gives them one); the CRLF-only text must be valid
    // and decode back.
    if (i % 2 && !assertValidQp(t, ours, JSON.stringify(s))) mismatches++;
    if (i % 2 && !libqp.decode(ours).equals(Buffer.from(s, 'utf8'))) {
      if (mismatches++ < 3) t.fail(`does not decode back: ${JSON.stringify(s)}`);
    }
  }
  t.equal(mismatches, 0, '20000 random texts');
});

t.test('quotedPrintable of plain text: its `plain` path writes the bytes of nodemailer and of the regex', async (t) => {
  const rnd = seeded(4);
  let mismatches = 0;
  let fast = 0;
  for (let i = 0; i < 20000; i++) {
    let s = randomOf(rnd, PLAIN_PIECES, 120);
    // Mostly CRLF-only, as compose gives it; the rest with lone CR and LF, which the plain path hands back.
    if (i % 4) s = s.replace(/\r\n|\r|\n/g, '\r\n');
    if (!isPlainText(s)) {
      if (mismatches++ < 3) t.fail(`not plain: ${JSON.stringify(s)}`);
      continue;
    }
    if (s.length > 76 && !BARE_CR_OR_LF.test(s)) fast++;
    const ours = quotedPrintableLines(s, true);
    if (ours.text !== theirsQp(s) || ours.text !== quotedPrintable(s, false)) {
      if (mismatches++ < 3) t.fail(`differs for ${JSON.stringify(s)}`);
      continue;
    }
    if (ours.crlfOnly && BARE_CR_OR_LF.test(ours.text)) {
      if (mismatches++ < 3) t.fail(`said CRLF-only, is not: ${JSON.stringify(s)}`);
    }
  }
  t.equal(mismatches, 0, '20000 random plain texts');
  t.ok(fast > 10000, `most (${fast}) are long and CRLF-only, what the plain path wraps itself`);
});

t.test('quotedPrintableParts of text with LF line breaks writes the pieces of the same text with CRLF', async (t) => {
  // compose hands a JSON body's text over with its LFs (lfBreaks): the same bytes must come out as for the text
  // converted first, plain or not, at every length (the short ones count the CRs they do not hold yet).
  const rnd = seeded(12);
  let mismatches = 0;
  for (let i = 0; i < 20000; i++) {
    const lf = randomOf(rnd, i % 2 ? PLAIN_PIECES : PIECES, i % 3 ? 300 : 40).replace(/\r/g, '');
    const crlf = lf.replaceAll('\n', '\r\n');
    for (const plain of isPlainText(lf) ? [false, true] : [false]) {
      const out: string[] = [];
      const crlfOnly = quotedPrintableParts(lf, plain, out, true);
      const ours = out.join('');
      if (ours !== quotedPrintableLines(crlf, plain).text || ours !== theirsQp(crlf)) {
        if (mismatches++ < 3) t.fail(`differs for ${JSON.stringify(lf)} (plain: ${plain})`);
      } else if (crlfOnly && BARE_CR_OR_LF.test(ours)) {
        if (mismatches++ < 3) t.fail(`said CRLF-only, is not: ${JSON.stringify(lf)}`);
      }
    }
  }
  t.equal(mismatches, 0, '20000 random texts');
  const body = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\n'.repeat(1300);
  const out: string[] = [];
  quotedPrintableParts(body, true, out, true);
  t.equal(out.join(''), quotedPrintable(body.replaceAll('\n', '\r\n'), true), 'a 100 kB body of 80-character lines');
});

t.test('quotedPrintableSegments: the pieces of the whole text, joined a segment at a time', async (t) => {
  // Segments of a few characters to a few hundred, in random texts of up to 300 pieces: CRLF-only, LF-only (lfBreaks)
  // and with lone CR or LF (refused, nothing pushed), plain or not. Then a text over WHOLE_STRING, which
  // quotedPrintableParts itself takes a segment at a time, against nodemailer's encoder of the whole.
  const rnd = seeded(23);
  let mismatches = 0;
  let segmented = 0;
  for (let i = 0; i < 20000; i++) {
    const raw = randomOf(rnd, i % 2 ? PLAIN_PIECES : PIECES, 300);
    const lfBreaks = i % 3 === 1;
    const text = lfBreaks ? raw.replace(/\r/g, '') : i % 3 === 2 ? raw : raw.replace(/\r\n|\r|\n/g, '\r\n');
    const segment = 1 + Math.floor(rnd() * 300);
    for (const plain of isPlainText(text) ? [false, true] : [false]) {
      const whole: string[] = [];
      const wholeCrlf = quotedPrintableParts(text, plain, whole, lfBreaks);
      const out = ['before'];
      if (quotedPrintableSegments(text, plain, out, lfBreaks, segment)) {
        segmented++;
        if (!wholeCrlf || out.slice(1).join('') !== whole.join('')) {
          if (mismatches++ < 3) t.fail(`differs for ${JSON.stringify(text)} in segments of ${segment}`);
        }
      } else if (out.length !== 1 && mismatches++ < 3) t.fail(`refused but pushed: ${JSON.stringify(text)}`);
    }
  }
  t.equal(mismatches, 0, '20000 random texts');
  t.ok(segmented > 5000, `${segmented} taken a segment at a time`);
  // A line longer than a segment, then a last line too short to be a segment: it goes with the long one.
  const rest = `${'a'.repeat(79)}\n`.repeat(20) + `${'x'.repeat(2000)}\nend\n`;
  const out: string[] = [];
  t.ok(quotedPrintableSegments(rest, true, out, true, 800), 'a short last line: segmented all the same');
  const whole: string[] = [];
  quotedPrintableParts(rest, true, whole, true);
  t.equal(out.length, 3, 'in three segments');
  t.equal(out.join(''), whole.join(''), 'the whole text encoded');
  const line = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do = eiusmod tempor. Grüße  \n';
  for (const [what, text, lfBreaks] of [
    ['300 kB with LF breaks', line.repeat(3400), true],
    ['300 kB with CRLF breaks', line.repeat(3400).replaceAll('\n', '\r\n'), false],
  ] as const) {
    const out: string[] = [];
    t.ok(quotedPrintableParts(text, false, out, lfBreaks), `${what}: CRLF-only`);
    t.ok(out.length > 4 && out.every((p) => p.length < 128 * 1024), `${what}: ${out.length} pieces, none of 128 KiB`);
    t.equal(out.join(''), theirsQp(text.replaceAll(/\r?\n/g, '\r\n')), `${what}: nodemailer's bytes`);
  }
});

t.test('quotedPrintable: the cases by name', async (t) => {
  const cases: Record<string, string> = {
    empty: '',
    'a 100 kB body of 80-character lines':
      'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.\r\n'.repeat(1300),
    'a line of 75 and of 76 before CRLF': `${'a'.repeat(75)}\r\n${'b'.repeat(76)}\r\n${'c'.repeat(77)}`,
    'a last line of 60 with a space': `x\r\n${'w'.repeat(40)} ${'v'.repeat(19)}`,
    'trailing spaces and tabs': 'end with space \r\nand tab\t\r\n\r\nlast ',
    'dots and = at line starts': '.\r\n..\r\n=\r\n=3D\r\n.leading dot',
    'a line of = signs': '='.repeat(300),
    'long UTF-8 lines': 'Привет мир, как дела? '.repeat(40) + '\r\n' + '日本語のテキスト'.repeat(40),
    'emoji across breaks': '😀'.repeat(100),
    'no spaces at all': 'z'.repeat(1000),
    'long lines ending in a space or tab': `${'a'.repeat(90)} \r\n${'b '.repeat(50)}\t\r\n${'c'.repeat(74)} \r\nend `,
    'a last line of 76 ending in a tab': `${'x'.repeat(80)}\r\n${'y'.repeat(75)}\t`,
    'a blank line and a line of blanks': `${'z'.repeat(80)}\r\n\r\n${' '.repeat(90)}\r\n \r\n\t`,
    '= and DEL in long lines': `${'a=b\x7f'.repeat(40)}\r\n${'='.repeat(100)}\r\n${'\x7f'.repeat(100)}`,
  };
  for (const [what, s] of Object.entries(cases)) {
    const ours = quotedPrintable(s);
    t.equal(ours, theirsQp(s), what);
    if (isPlainText(s)) t.equal(quotedPrintable(s, true), ours, `${what}: the plain path`);
    assertValidQp(t, ours, what);
    t.ok(libqp.decode(ours).equals(Buffer.from(s, 'utf8')), `${what}: decodes back`);
  }
});

t.test('base64Lines writes the bytes of nodemailer: 76-character lines, CRLF between them', async (t) => {
  const rnd = seeded(2);
  for (let n = 0; n < 400; n++) {
    const buf = Buffer.from(Array.from({ length: n * 7 }, () => Math.floor(rnd() * 256)));
    const ours = base64Lines(buf);
    t.equal(ours, b64Wrap(b64Encode(buf), 76), `${buf.length} octets`);
    t.ok(ours.split('\r\n').every((l) => l.length <= 76));
    t.ok(Buffer.from(ours.replace(/\r\n/g, ''), 'base64').equals(buf));
  }
  t.equal(base64Lines('Grüße'), b64Wrap(b64Encode('Grüße'), 76), 'a string is taken as UTF-8');
});

t.test(
  'base64Pieces are base64Lines, a piece under 128 KiB each, for data about a chunk long and longer',
  async (t) => {
    const rnd = seeded(22);
    for (const n of [
      0,
      1,
      BASE64_CHUNK - 1,
      BASE64_CHUNK,
      BASE64_CHUNK + 1,
      2 * BASE64_CHUNK,
      2 * BASE64_CHUNK + 57,
      300_000,
    ]) {
      const buf = Buffer.from(Array.from({ length: n }, () => Math.floor(rnd() * 256)));
      const out: string[] = [];
      base64Pieces(buf, out);
      t.equal(out.join(''), b64Wrap(b64Encode(buf), 76), `${n} octets in ${out.length} pieces`);
      t.ok(
        out.every((p) => p.length < 128 * 1024),
        'no piece of 128 KiB',
      );
      t.equal(out.length, n > BASE64_CHUNK ? 2 * Math.ceil(n / BASE64_CHUNK) - 1 : 1, 'a piece a chunk, CRLFs between');
    }
    const out: string[] = [];
    base64Pieces('Grüße', out);
    t.same(out, [base64Lines('Grüße')], 'a string is taken as UTF-8');
  },
);

t.test("isPlainText is mime-funcs' for every code unit and for random text", async (t) => {
  let mismatches = 0;
  const check = (s: string) => {
    if (ourIsPlainText(s) !== isPlainText(s) && mismatches++ < 3)
      t.fail(`differs for ${JSON.stringify(s.slice(0, 80))}`);
  };
  for (let c = 0; c <= 0xffff; c++) {
    const u = String.fromCharCode(c);
    check(u);
    check(`plain words ${u}\r\n`);
  }
  check('');
  check('\ud83d\ude00'); // a pair: one code point, two units, four octets
  const rnd = seeded(5);
  for (let i = 0; i < 3000; i++) check(randomOf(rnd, PIECES, 60));
  t.equal(mismatches, 0, 'no text where the two differ');
});

t.test('isAsciiText: every code unit below 0x80, whichever way V8 keeps the string', async (t) => {
  const reference = (s: string) => !/[^\x00-\x7f]/.test(s);
  let mismatches = 0;
  const seen = new Set<string>();
  const check = (s: string) => {
    const kind = isStringOneByteRepresentation(s) ? 'one-byte' : 'two-byte';
    seen.add(`${kind} ${reference(s)}`);
    for (const ours of [isAsciiText(s), isAsciiText(s, Buffer.from(s, 'latin1'))])
      if (ours !== reference(s) && mismatches++ < 3) t.fail(`differs for ${kind} ${JSON.stringify(s.slice(0, 80))}`);
  };
  for (let c = 0; c <= 0xffff; c++) {
    const u = String.fromCharCode(c);
    check(`${'plain words '.repeat(8)}${u}\r\n`);
    // ASCII kept two octets a character: the rest of a string that began with a code unit above 0xff.
    check(`\u0141${'a'.repeat(40)}${u}`.slice(1));
  }
  check('');
  const rnd = seeded(6);
  for (let i = 0; i < 3000; i++) check(randomOf(rnd, PIECES, 60));
  t.equal(mismatches, 0, 'no text where it differs from a regular expression');
  // Both representations met, each with both answers: 'Ł' (0x141) would be 'A' as latin1.
  t.same([...seen].sort(), ['one-byte false', 'one-byte true', 'two-byte false', 'two-byte true']);
});

t.test("hasLongerLines is mime-funcs' for random text and every kind of line end", async (t) => {
  let mismatches = 0;
  let checked = 0;
  const check = (s: string, n: number) => {
    checked++;
    if (ourHasLongerLines(s, n) !== hasLongerLines(s, n) && mismatches++ < 3)
      t.fail(`differs at ${n} for ${JSON.stringify(s.slice(0, 80))}`);
  };
  const ends = ['\r\n', '\n', '\r', '\u2028', '\u2029', '\r\r', '\n\r'];
  for (const n of [0, 1, 10, 76]) {
    check('', n);
    for (const end of ends) {
      for (const len of [n - 1, n, n + 1]) {
        if (len < 0) continue;
        const line = 'x'.repeat(len);
        // The long line first, last, alone, between short ones, with its end and without.
        for (const s of [line, line + end, end + line, `ab${end}${line}`, `${line}${end}ab`, `a${end}${line}${end}b`])
          check(s, n);
      }
    }
  }
  // Over 128 kB a text counts as long whatever its lines; at the limit it is looked at.
  const short = 'short line\r\n';
  check(short.repeat(Math.floor((128 * 1024) / short.length)), 76);
  check('y'.repeat(128 * 1024), 76);
  check('y'.repeat(128 * 1024 + 1), 76);
  check(`${short.repeat(10000)}z`.slice(0, 128 * 1024 + 1), 76);
  const rnd = seeded(11);
  for (let i = 0; i < 3000; i++) {
    const s = randomOf(rnd, PIECES, 40);
    check(s, 76);
    check(s, 10);
  }
  for (let i = 0; i < 200; i++) check(randomOf(rnd, [...PIECES, '\u2028', '\u2029', 'z'.repeat(77)], 60), 76);
  t.equal(mismatches, 0, `no text where the two differ (${checked} checked)`);
});

t.test("textTransferEncoding is MimeNode's choice for a text part", async (t) => {
  const rnd = seeded(3);
  const texts = [
    'short',
    'x'.repeat(77),
    'x'.repeat(76),
    `${'a '.repeat(70000)}`,
    '1234 5678',
    '1'.repeat(100),
    'Grüße',
    'Привет',
    '\u0001\u0002ab',
    'a\u2028'.repeat(50),
  ];
  for (let i = 0; i < 3000; i++) texts.push(randomOf(rnd, PIECES, 100));
  // Long texts whose letters and other code units (non-ASCII, controls) are even or one apart, in either order,
  // around the 4096-unit blocks after which the rest of the text may no longer be weighed.
  for (const n of [4095, 4096, 4097, 6000, 8192, 20000]) {
    for (const extra of [-1, 0, 1]) {
      const letters = 'a'.repeat(n + extra);
      for (const other of ['é'.repeat(n), '\u0001'.repeat(n), 'ü\u0002'.repeat(n / 2)]) {
        texts.push(letters + other, other + letters, `${letters} ${other}\r\n`, `${other}\t${letters}`);
      }
    }
  }
  for (let i = 0; i < 40; i++) texts.push(randomOf(rnd, PIECES, 3000));
  let mismatches = 0;
  for (const s of texts) {
    const node = new MimeNode('text/plain').setContent(s);
    const theirs = s ? node.getTransferEncoding() : '7bit';
    if (textTransferEncoding(s) !== theirs && mismatches++ < 3) t.fail(`differs for ${JSON.stringify(s.slice(0, 80))}`);
  }
  t.equal(mismatches, 0, `${texts.length} texts`);
});
