// mail/dkim-header.ts against what it replaces: mailauth 7.1.0's header canonicalization and signature field, and
// libmime's foldLines, on random input. A signature this writes is checked by two verifiers in dkim-sign.test.ts.
import t from 'tap';
import { createRequire } from 'node:module';
import {
  canonicalSignatureField,
  foldAtSpaces,
  plainTagValue,
  relaxedField,
  signatureField,
  signatureTags,
} from '../../mail/dkim-header.js';
import { randomOf, seeded } from '../helpers/seeded.js';

const require = createRequire(import.meta.url);
const tools = require('mailauth/lib/tools.js') as {
  formatRelaxedLine(line: Buffer, suffix: string): Buffer;
  formatSignatureHeaderLine(type: 'DKIM', values: Record<string, unknown>, folded: boolean): string;
  parseHeaders(buf: Buffer): { parsed: { key: string | null; casedKey?: string; line: Buffer }[] };
  getSigningHeaderLines(
    parsed: { key: string | null; casedKey?: string; line: Buffer }[],
    names: string,
  ): { keys: string; headers: { key: string | null; casedKey?: string; line: Buffer }[] };
};
const { generateCanonicalizedHeader } = require('mailauth/lib/dkim/header/index.js') as {
  generateCanonicalizedHeader(
    type: 'DKIM',
    lines: { keys: string; headers: { line: Buffer }[] },
    opts: Record<string, unknown>,
  ): { canonicalizedHeader: Buffer; dkimHeaderOpts: Record<string, unknown> };
};
// The libmime that mailauth itself loads.
const libmime = createRequire(require.resolve('mailauth/lib/tools.js'))('libmime') as {
  foldLines(s: string, lineLength?: number): string;
};

const rnd = seeded(11);
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const base64 = (n: number) => Array.from({ length: n }, () => pick([...B64])).join('');

t.test("foldAtSpaces is libmime's foldLines for text of words and spaces", async (t) => {
  const words = ['a', 'word', 'x'.repeat(75), 'y'.repeat(76), 'z'.repeat(77), 'w'.repeat(150), 'h=From:To', ';'];
  let mismatches = 0;
  for (let i = 0; i < 20000; i++) {
    let s = '';
    for (let n = Math.floor(rnd() * 40); n > 0; n--)
      s += rnd() < 0.6 ? pick(words) : ' '.repeat(1 + (rnd() < 0.2 ? 3 : 0));
    if (foldAtSpaces(s) !== libmime.foldLines(s) && mismatches++ < 3)
      t.fail(`differs for ${JSON.stringify(s).slice(0, 300)}`);
  }
  t.equal(mismatches, 0, '20000 strings');
  // Every length around the line length, a space at every place in it.
  for (let len = 70; len <= 160; len++)
    for (let sp = 0; sp < len; sp += 7) {
      const s = 'q'.repeat(sp) + ' ' + 'r'.repeat(len - sp - 1);
      t.equal(foldAtSpaces(s), libmime.foldLines(s), `length ${len}, space at ${sp}`, { diagnostic: false });
    }
  t.equal(foldAtSpaces('a'.repeat(80)), 'a'.repeat(80), 'a word longer than a line stays whole');
});

t.test("relaxedField is mailauth's formatRelaxedLine for random header fields", async (t) => {
  const pieces = [
    'Subject',
    'FROM',
    'x-Ä',
    ':',
    ': ',
    ' ',
    '\t',
    '  \t',
    'value',
    'ÉÀ',
    '\r\n ',
    '\n\t',
    '\r\n',
    '=?UTF-8?Q?h=C3=A9?=',
  ];
  let mismatches = 0;
  for (let i = 0; i < 20000; i++) {
    const s = randomOf(rnd, pieces, 14);
    const line = Buffer.from(s, 'latin1');
    const theirs = tools.formatRelaxedLine(line, '\r\n').toString('latin1');
    if (relaxedField(line.toString('latin1')) !== theirs && mismatches++ < 3)
      t.fail(`differs for ${JSON.stringify(s)}`);
  }
  t.equal(mismatches, 0, '20000 fields');
  t.equal(relaxedField('  SubJect \t:  a \t b \r\n  c  '), 'subject:a b c\r\n');
});

t.test("the signature field and canonicalized header are mailauth's for the values we sign with", async (t) => {
  const names = ['From', 'To', 'Cc', 'Subject', 'Date', 'Message-ID', 'Reply-To', 'Content-Type', 'MIME-Version'];
  const signed = names.join(':');
  // b= lengths: Ed25519, RSA-1024, -2048, -3072, -4096.
  const signatureLengths = [88, 172, 344, 512, 684];
  let mismatches = 0;
  for (let i = 0; i < 3000; i++) {
    const fields = Array.from({ length: 1 + Math.floor(rnd() * 12) }, () => {
      const name = pick(names);
      const cased = rnd() < 0.5 ? name : name.toUpperCase();
      const value = Array.from({ length: Math.floor(rnd() * 12) }, () => pick(['w', 'é', ' ', '\t', 'x'.repeat(40)]));
      return `${cased}:${rnd() < 0.8 ? ' ' : '  '}${value.join('')}`.replace(/(.{70})/g, '$1\r\n ');
    });
    const parsed = tools.parseHeaders(Buffer.from(fields.join('\r\n') + '\r\n', 'latin1')).parsed;
    const present = tools.getSigningHeaderLines(parsed, signed);
    const signing = { keys: `${present.keys}: ${names.join(': ')}`, headers: present.headers };
    const domain = pick(['example.test', 'a.b.c.example.test', 'xn--bcher-kva.example', 'x'.repeat(60) + '.test']);
    const selector = pick(['s1', 'svc20261129', 'S-long_selector.' + 'k'.repeat(30)]);
    const algorithm = pick(['rsa-sha256', 'ed25519-sha256']);
    const signTimeMs = Math.floor(rnd() * 4e12);
    const bodyHash = base64(43) + '=';
    const theirs = generateCanonicalizedHeader('DKIM', signing, {
      signingDomain: domain,
      selector,
      algorithm,
      canonicalization: 'relaxed/relaxed',
      signTime: new Date(signTimeMs),
      bodyHash,
    });
    const tags = signatureTags({
      algorithm,
      domain,
      selector,
      headerKeys: signing.keys,
      time: Math.floor(signTimeMs / 1000),
      bodyHash,
    });
    const ours =
      signing.headers.map((h) => relaxedField(h.line.toString('latin1'))).join('') + canonicalSignatureField(tags);
    const b = base64(pick(signatureLengths));
    const field = tools.formatSignatureHeaderLine('DKIM', { ...theirs.dkimHeaderOpts, b }, true);
    const same = ours === theirs.canonicalizedHeader.toString('latin1') && signatureField(tags, b) === field;
    if (!same && mismatches++ < 3) t.fail(`differs for ${JSON.stringify({ fields, domain, selector, b })}`);
  }
  t.equal(mismatches, 0, '3000 signatures');
});

t.test('plainTagValue admits the ASCII a tag can hold as it stands', async (t) => {
  for (const v of ['example.test', 'xn--bcher-kva.example', 's1', 'S_1-x']) t.ok(plainTagValue(v), v);
  for (const v of ['', 'bücher.example', 'a b', 'a;b', 'a\tb', 'a\r\nb']) t.notOk(plainTagValue(v), JSON.stringify(v));
});
