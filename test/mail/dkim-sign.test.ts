// Our signer (mailauth's canonicalization, a cached KeyObject, oversigned h=) checked by two verifiers:
// mailauth's own and python3-dkim.
import t from 'tap';
import { createPrivateKey } from 'node:crypto';
import { createRequire } from 'node:module';
import { generateDkimKey } from '../../mail/dkim-keys.js';
import { dkimSign, dkimSignatures, DkimSignError, OVERSIGNED_HEADERS, relaxedBodyHash } from '../../mail/dkim-sign.js';
import { composeMessage } from '../../mail/compose.js';
import { STRING_CHUNK, WHOLE_STRING } from '../../mail/string-chunks.js';
import { dkimTxtValue } from '../../mail/dkim-keys.js';
import { verifyDkim } from '../helpers/dkim-verify.js';
import { randomOf, seeded } from '../helpers/seeded.js';

const require = createRequire(import.meta.url);
const { dkimVerify: mailauthVerify } = require('mailauth/lib/dkim/verify.js') as {
  dkimVerify(
    input: Buffer,
    o: { resolver: (name: string, type: string) => Promise<string[][]> },
  ): Promise<{ results: { status: { result: string } }[] }>;
};

const message = Buffer.from(
  [
    'From: Ana <ana@example.test>',
    'To: bo@dest.test',
    'Subject: =?UTF-8?Q?h=C3=A9llo?=',
    'Date: Sat, 21 Nov 2026 10:00:00 +0000',
    'Message-ID: <x1@example.test>',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'X-Not-Signed: 1',
    '',
    'Hello   there  ',
    '',
    '',
  ].join('\r\n'),
);
const signTime = Date.UTC(2026, 10, 21, 10, 0, 0);
const { dkimBody } = require('mailauth/lib/dkim/body/index.js') as {
  dkimBody(c: 'relaxed', h: 'sha256', l: false): { update(b: Buffer): void; digest(e: 'base64'): string };
};
const mailauthBodyHash = (b: Buffer) => {
  const h = dkimBody('relaxed', 'sha256', false);
  h.update(b);
  return h.digest('base64');
};

/** Verdicts of mailauth's verifier and of python3-dkim, the key published at `<selector>._domainkey`. */
async function verdicts(raw: Buffer, k: { algorithm: 'rsa' | 'ed25519'; selector: string; publicKey: string }) {
  const txt = dkimTxtValue(k.algorithm, k.publicKey);
  const name = `${k.selector}._domainkey.example.test`;
  const resolver = async (n: string, type: string) => {
    if (type === 'TXT' && n.toLowerCase() === name) return [[txt]];
    throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  };
  const theirs = await mailauthVerify(raw, { resolver });
  const python = await verifyDkim(raw, { [name]: txt });
  return { mailauth: theirs.results[0]?.status.result, python: python.signatures[0]?.ok };
}

for (const algorithm of ['rsa', 'ed25519'] as const) {
  t.test(
    `${algorithm}: verified by mailauth and python3-dkim; oversigned fields refuse a prepended copy`,
    async (t) => {
      const k = await generateDkimKey(algorithm);
      const signed = await dkimSign(
        message,
        [{ domain: 'example.test', selector: k.selector, key: createPrivateKey(k.privatePem) }],
        signTime,
      );
      t.same(await verdicts(signed, { ...k, algorithm }), { mailauth: 'pass', python: true });
      // h= lists the present fields bottom-up, then each oversigned name once more (RFC 6376 §5.4.2).
      const h = /\bh=([^;]+);/
        .exec(signed.toString().replace(/\r\n\s+/g, ' '))?.[1]
        ?.split(':')
        .map((s) => s.trim().toLowerCase());
      const present = 'content-type:mime-version:message-id:date:subject:to:from'.split(':');
      t.same(h, [...present, ...OVERSIGNED_HEADERS.map((n) => n.toLowerCase())]);
      t.notMatch(signed.toString(), /h=[^;]*X-Not-Signed/i);
      // A field added above the signed ones, present in the message or not, breaks the signature.
      const sigEnd = signed.length - message.length;
      for (const extra of [
        'Subject: win a prize',
        'Reply-To: thief@evil.test',
        'From: ceo@example.test',
        'Cc: x@evil.test',
        'MIME-Version: 1.0',
        'List-Unsubscribe: <https://evil.test/u>',
        'Feedback-ID: a:b:c:evil',
      ]) {
        const forged = Buffer.concat([signed.subarray(0, sigEnd), Buffer.from(extra + '\r\n'), message]);
        t.same(await verdicts(forged, { ...k, algorithm }), { mailauth: 'fail', python: false }, extra);
      }
    },
  );
}

t.test('two keys give two signatures, the message follows them unchanged', async (t) => {
  const [r, e] = await Promise.all([generateDkimKey('rsa'), generateDkimKey('ed25519')]);
  const signed = await dkimSign(
    message,
    [
      { domain: 'example.test', selector: r.selector, key: createPrivateKey(r.privatePem) },
      { domain: 'example.test', selector: e.selector, key: createPrivateKey(e.privatePem) },
    ],
    signTime,
  );
  t.equal(signed.toString().match(/^DKIM-Signature:/gm)?.length, 2);
  t.ok(signed.subarray(signed.length - message.length).equals(message));
});

t.test('a U-label domain is signed as its A-label (mailauth formats that signature) and verifies', async (t) => {
  const k = await generateDkimKey('rsa');
  const signed = await dkimSign(
    message,
    [{ domain: 'bücher.example', selector: k.selector, key: createPrivateKey(k.privatePem) }],
    signTime,
  );
  t.match(signed.toString(), /\bd=xn--bcher-kva\.example;/);
  const txt = dkimTxtValue('rsa', k.publicKey);
  const name = `${k.selector}._domainkey.xn--bcher-kva.example`;
  const resolver = async (n: string, type: string) => {
    if (type === 'TXT' && n.toLowerCase() === name) return [[txt]];
    throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
  };
  const theirs = await mailauthVerify(signed, { resolver });
  t.equal(theirs.results[0]?.status.result, 'pass');
  t.equal((await verifyDkim(signed, { [name]: txt })).signatures[0]?.ok, true, 'python3-dkim');
});

t.test('fails closed', async (t) => {
  await t.rejects(dkimSignatures(message, [], signTime), DkimSignError);
  const r = await generateDkimKey('rsa');
  const rsa = [{ domain: 'example.test', selector: r.selector, key: createPrivateKey(r.privatePem) }];
  await t.rejects(dkimSignatures(message, rsa, Number.NaN), /no valid signing time/);
  const { privateKey } = await import('node:crypto').then((c) => c.generateKeyPairSync('ec', { namedCurve: 'P-256' }));
  await t.rejects(
    dkimSignatures(message, [{ domain: 'example.test', selector: 's', key: privateKey }], signTime),
    DkimSignError,
  );
  // A refused key after a good one: refused before any signature starts, so none is left running (or rejecting
  // unobserved) on the thread pool.
  await t.rejects(
    dkimSignatures(message, [...rsa, { domain: 'example.test', selector: 's', key: privateKey }], signTime),
    DkimSignError,
  );
  const k = await generateDkimKey('rsa');
  await t.rejects(
    dkimSignatures(
      Buffer.from('Subject: x\r\n\r\nbody'),
      [{ domain: 'example.test', selector: 's', key: createPrivateKey(k.privatePem) }],
      signTime,
    ),
    /no From/,
  );
});

t.test('dkimSignatures says crlfOnly only of a message whose CRs and LFs are all CRLF pairs', async (t) => {
  const e = await generateDkimKey('ed25519');
  const keys = [{ domain: 'example.test', selector: e.selector, key: createPrivateKey(e.privatePem) }];
  const rnd = seeded(21);
  const pieces = ['x', ' ', '.', '\r\n', '\r\n.', '\r', '\n', '\t', 'é'];
  const LONE = /\r(?!\n)|(?<!\r)\n/;
  let wrong = 0;
  let said = 0;
  for (let i = 0; i < 2000; i++) {
    const header = randomOf(rnd, pieces, i % 2 ? 0 : 6).replace(/\r\n|\r|\n/g, i % 5 ? '\r\n' : '\n');
    let body = randomOf(rnd, pieces, 60);
    if (i % 3) body = body.replace(/\r\n|\r|\n/g, '\r\n') + '\r\n';
    const blank = i % 7 ? '\r\n\r\n' : '\n\n';
    const raw = Buffer.from(`From: a@example.test\r\nX: ${header}${blank}${body}`);
    const { fields, crlfOnly } = await dkimSignatures(raw, keys, signTime);
    const truth = !LONE.test(Buffer.concat([fields, raw]).toString('latin1'));
    if (crlfOnly) said++;
    if (crlfOnly && !truth && wrong++ < 3) t.fail(`crlfOnly of ${JSON.stringify(raw.toString())}`);
  }
  t.equal(wrong, 0, 'never said of a message with a lone CR or LF');
  t.ok(said > 400, `said of ${said} of 2000`);
});

t.test('dkimSignatures told a message is CRLF-only signs it as when it looks for itself', async (t) => {
  const e = await generateDkimKey('ed25519');
  const keys = [{ domain: 'example.test', selector: e.selector, key: createPrivateKey(e.privatePem) }];
  const rnd = seeded(22);
  // CRLF lines only, empty ones at the end: half of them canonical as they stand (the signer's fast way), half with
  // lines to rewrite (a tab, two spaces, a space at the end).
  const clean = ['x', 'y', ' x', '.', '\r\n'];
  const rewritten = ['x', 'y', ' ', '  ', '\t', '.', '\r\n'];
  for (let i = 0; i < 300; i++) {
    const body = `x${randomOf(rnd, i % 2 ? clean : rewritten, 40)}\r\n${'\r\n'.repeat(i % 3)}`;
    const raw = Buffer.from(`From: a@example.test\r\nSubject: ${i}\r\n\r\n${body}`);
    const looked = await dkimSignatures(raw, keys, signTime);
    const told = await dkimSignatures(raw, keys, signTime, true);
    if (!told.fields.equals(looked.fields)) t.fail(`another signature for ${JSON.stringify(body)}`);
    if (!told.crlfOnly || !looked.crlfOnly) t.fail(`crlfOnly not said of ${JSON.stringify(body)}`);
  }
  t.pass('300 bodies, the same signatures (Ed25519 is deterministic)');
});

t.test('dkimSignatures is done with the message before its first await (the spool lends it)', async (t) => {
  const r = await generateDkimKey('rsa');
  const keys = [{ domain: 'example.test', selector: r.selector, key: createPrivateKey(r.privatePem) }];
  const kept = await dkimSignatures(Buffer.from(message), keys, signTime);
  const lent = Buffer.from(message);
  const signing = dkimSignatures(lent, keys, signTime);
  // What the next read of the spool would do to bytes it lent.
  lent.fill(0x41);
  t.ok((await signing).fields.equals(kept.fields), 'the same signature');
});

t.test("relaxedBodyHash is mailauth's relaxed body hash (RFC 6376 §3.4.4) for random bodies", async (t) => {
  const pieces = [
    'a',
    'b',
    ' ',
    ' ',
    '\t',
    '\r\n',
    '\r\n',
    '\r\n',
    '\r',
    '\n',
    'é',
    '  \t ',
    'word ',
    '.',
    '\r\n\r\n',
    ' \r\n',
  ];
  const rnd = seeded(7);
  let mismatches = 0;
  for (let i = 0; i < 20000; i++) {
    let s = randomOf(rnd, pieces, 200);
    // Two in three CRLF-only (the one-pass path), one of those ending without a CRLF (mailauth's path).
    if (i % 3) s = s.replace(/\r\n|\r|\n/g, '\r\n');
    if (i % 3 === 1 && !s.endsWith('\r\n')) s += '\r\n';
    const b = Buffer.from(s);
    if (relaxedBodyHash(b) !== mailauthBodyHash(b) && mismatches++ < 3) t.fail(`differs for ${JSON.stringify(s)}`);
  }
  t.equal(mismatches, 0, '20000 bodies');
  // Bodies canonical as they stand but for their empty lines at the end (the one-update path), and near misses.
  const calm = ['word', 'a', ' ', '.', 'é', '\r\n', '\r\n\r\n', '\r\n\r\n\r\n', ' \r\n', '\t', '\r', '\n'];
  let calmPath = 0;
  for (let i = 0; i < 20000; i++) {
    let s = '';
    for (let n = Math.floor(rnd() * 60); n > 0; n--) {
      const piece = calm[Math.floor(rnd() * (i % 2 ? 7 : calm.length))]!;
      // A space only between words: most bodies then have none to squeeze.
      s += piece === ' ' && (s.endsWith(' ') || s.endsWith('\n') || s === '') ? 'x' : piece;
    }
    if (!s.endsWith('\r\n')) s += '\r\n';
    if (!/\t| [ \r]|\r(?!\n)|(?<!\r)\n/.test(s)) calmPath++;
    const b = Buffer.from(s);
    if (relaxedBodyHash(b) !== mailauthBodyHash(b) && mismatches++ < 3) t.fail(`differs for ${JSON.stringify(s)}`);
  }
  t.equal(mismatches, 0, '20000 more, many canonical as they stand');
  t.ok(calmPath > 4000, `${calmPath} of them took the one-update path`);
  for (const s of ['', '\r\n', '\r\n\r\n', ' \r\n\t\r\n', 'a\r\n\r\n\r\n', 'a  b\t\tc \r\n  d\r\n', 'a\r\n\r\nb\r\n'])
    t.equal(relaxedBodyHash(Buffer.from(s)), mailauthBodyHash(Buffer.from(s)), JSON.stringify(s));
});

t.test("relaxedBodyHash of bodies of long CRLF lines is mailauth's", async (t) => {
  const rnd = seeded(13);
  const words = ['Lorem ipsum dolor sit amet,', 'consectetur', 'elit', ' ', '  ', '\t', '.', 'é'];
  let mismatches = 0;
  let lone = 0;
  for (let i = 0; i < 3000; i++) {
    const lines: string[] = [];
    for (let l = Math.floor(rnd() * 60); l > 0; l--) {
      let line = '';
      for (let w = Math.floor(rnd() * 10); w > 0; w--) line += words[Math.floor(rnd() * (i % 2 ? 3 : words.length))];
      lines.push(line);
    }
    let s = lines.join('\r\n') + '\r\n';
    // One in four with a lone CR or LF somewhere, which only mailauth's canonicalization takes.
    if (i % 4 === 0 && s.length > 2) {
      const at = Math.floor(rnd() * (s.length - 2));
      s = s.slice(0, at) + (rnd() < 0.5 ? '\r' : '\n') + 'x' + s.slice(at);
      lone++;
    }
    const b = Buffer.from(s);
    if (relaxedBodyHash(b) !== mailauthBodyHash(b) && mismatches++ < 3) t.fail(`differs for ${JSON.stringify(s)}`);
  }
  t.equal(mismatches, 0, `3000 bodies, ${lone} with a lone CR or LF`);
});

t.test("relaxedBodyHash of a body over WHOLE_STRING octets, scanned a chunk at a time, is mailauth's", async (t) => {
  // Clean lines of 78 octets and CRLF, with one thing at an octet near the first chunk's end: where it ends (after the
  // last LF within STRING_CHUNK octets), just before and just after, and astride octet STRING_CHUNK, where a cut that
  // did not look for a line's end would fall; then the same at the last chunk's end, the body's.
  const clean = `${'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempo.'.slice(0, 78)}\r\n`;
  const things = ['\t', '  ', ' \r\n', '\r\n\r\n', '\n', '\r', '\r\n', 'x'.repeat(STRING_CHUNK + 100)];
  let mismatches = 0;
  let cases = 0;
  let shortest = Infinity;
  for (const lines of [
    Math.ceil((STRING_CHUNK * 2.1) / clean.length),
    Math.ceil((STRING_CHUNK * 3.2) / clean.length),
  ]) {
    const base = clean.repeat(lines);
    const cut = base.lastIndexOf('\n', STRING_CHUNK - 1) + 1;
    const end = base.length;
    for (const thing of things)
      for (const at of [
        cut - 3,
        cut - 2,
        cut - 1,
        cut,
        cut + 1,
        cut + 2,
        cut + 80,
        STRING_CHUNK - 2,
        STRING_CHUNK - 1,
        end - 2,
        end,
      ]) {
        const b = Buffer.from(base.slice(0, at) + thing + base.slice(at), 'latin1');
        cases++;
        shortest = Math.min(shortest, b.length);
        if (relaxedBodyHash(b) !== mailauthBodyHash(b) && mismatches++ < 3)
          t.fail(`differs with ${JSON.stringify(thing.slice(0, 8))} at ${at} of ${b.length}`);
      }
    // Empty lines at the end, and nothing but clean lines.
    for (const tail of ['', '\r\n', '\r\n'.repeat(40)]) {
      const b = Buffer.from(base + tail, 'latin1');
      cases++;
      if (relaxedBodyHash(b) !== mailauthBodyHash(b) && mismatches++ < 3)
        t.fail(`differs ending ${JSON.stringify(tail)}`);
    }
  }
  // Lines to rewrite all through (every seventh has two spaces, a tab or a space at its end) and runs of empty lines,
  // so that the hash's line loop takes every chunk, with runs and empty lines across their ends.
  const mixed = Array.from({ length: Math.ceil((STRING_CHUNK * 3.2) / 30) }, (_, i) =>
    i % 7 === 0 ? ['a  b', 'a\tb', 'a b '][i % 3]! : i % 11 < 3 ? '' : `line ${i} `.padEnd(50, 'x'),
  ).join('\r\n');
  for (const b of [Buffer.from(`${mixed}\r\n`), Buffer.from(`${mixed}\r\n\r\n\r\n`)]) {
    cases++;
    shortest = Math.min(shortest, b.length);
    if (relaxedBodyHash(b) !== mailauthBodyHash(b) && mismatches++ < 3) t.fail(`differs for lines to rewrite`);
  }
  t.ok(shortest > WHOLE_STRING, `every body over WHOLE_STRING (the shortest ${shortest} octets)`);
  t.equal(mismatches, 0, `${cases} bodies`);
});

t.test('a composed 100 kB text and html message: signed, verified by mailauth and python3-dkim', async (t) => {
  const line = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.  Grüße\t ';
  const text = Array.from({ length: 1200 }, (_, i) => (i % 7 ? line : '')).join('\n');
  const raw = await composeMessage({
    from: { name: 'Ana', address: 'ana@example.test' },
    to: 'bo@dest.test',
    subject: 'Large',
    text,
    html: `<p>${text.replace(/\n/g, '</p>\n<p>')}</p>`,
    messageId: 'x2@example.test',
    date: new Date(signTime),
  });
  t.ok(raw.length > 200_000);
  const k = await generateDkimKey('rsa');
  const signed = await dkimSign(
    raw,
    [{ domain: 'example.test', selector: k.selector, key: createPrivateKey(k.privatePem) }],
    signTime,
  );
  t.same(await verdicts(signed, { ...k, algorithm: 'rsa' }), { mailauth: 'pass', python: true });
});
