// test/helpers/dkim-verify.ts: dkimpy (Debian python3-dkim) verifies what it signs itself and what
// mailauth signs, RSA and Ed25519 (RFC 8463), and fails on a changed body, a changed header and a
// missing or wrong key.
import t from 'tap';
import { generateKeyPairSync, createPublicKey, type KeyObject } from 'node:crypto';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { pythonDkimSign, verifyDkim } from '../helpers/dkim-verify.js';

type Algo = 'rsa' | 'ed25519';

interface Key {
  algo: Algo;
  privateKey: KeyObject;
  pem: string;
  /** The TXT record: RFC 6376 §3.6.1 (p= is the SPKI) and RFC 8463 §4 (p= is the raw 32-byte key). */
  txt: string;
}

function newKey(algo: Algo): Key {
  const { privateKey } =
    algo === 'rsa' ? generateKeyPairSync('rsa', { modulusLength: 2048 }) : generateKeyPairSync('ed25519');
  const spki = createPublicKey(privateKey).export({ type: 'spki', format: 'der' });
  const p = (algo === 'rsa' ? spki : spki.subarray(spki.length - 32)).toString('base64');
  return {
    algo,
    privateKey,
    pem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
    txt: `v=DKIM1; k=${algo}; p=${p}`,
  };
}

const rsa = newKey('rsa');
const ed = newKey('ed25519');
const DNS = { 'rsa1._domainkey.example.test': rsa.txt, 'ed1._domainkey.example.test': ed.txt };

const MESSAGE = Buffer.from(
  [
    'From: Sender <sender@example.test>',
    'To: rcpt@peer.test',
    'Subject: signed   twice',
    'Date: Sat, 21 Nov 2026 10:00:00 +0000',
    'Message-ID: <dkim-1@example.test>',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Hello  there, \t',
    'grüße',
    '',
    '',
  ].join('\r\n'),
  'utf8',
);

const tamperBody = (raw: Buffer) => Buffer.from(raw.toString('utf8').replace('Hello  there', 'Hello  where'), 'utf8');
const tamperSubject = (raw: Buffer) =>
  Buffer.from(raw.toString('utf8').replace('Subject: signed   twice', 'Subject: signed thrice'), 'utf8');

const pySign = (raw: Buffer, key: Key, selector: string) =>
  pythonDkimSign(raw, { domain: 'example.test', selector, privateKey: key.privateKey });

t.test('python signs, python verifies: rsa-sha256 and ed25519-sha256', async (t) => {
  for (const [key, selector, algorithm] of [
    [rsa, 'rsa1', 'rsa-sha256'],
    [ed, 'ed1', 'ed25519-sha256'],
  ] as const) {
    const header = await pySign(MESSAGE, key, selector);
    t.match(
      header.toString(),
      new RegExp(`^DKIM-Signature: v=1; a=${algorithm}; c=relaxed/relaxed; d=example.test;[^]*\\r\\n$`),
      `${algorithm} header`,
    );
    const signed = Buffer.concat([header, MESSAGE]);
    const r = await verifyDkim(signed, DNS);
    t.same(r.signatures, [{ domain: 'example.test', selector, algorithm, ok: true }], `${algorithm} verifies`);
    t.same(r.lookups, [`${selector}._domainkey.example.test`], 'the key came from the map');
  }
});

t.test('every signature is verified on its own', async (t) => {
  const first = await pySign(MESSAGE, rsa, 'rsa1');
  const second = await pySign(Buffer.concat([first, MESSAGE]), ed, 'ed1');
  const stale = await pySign(MESSAGE, rsa, 'gone'); // its key is not published
  const r = await verifyDkim(Buffer.concat([stale, second, first, MESSAGE]), DNS);
  t.same(
    r.signatures.map((s) => [s.selector, s.ok]),
    [
      ['gone', false],
      ['ed1', true],
      ['rsa1', true],
    ],
    'top first, each with its own verdict',
  );
  t.match(r.signatures[0]?.error, /missing public key: .*gone\._domainkey\.example\.test/);
  t.same(await verifyDkim(MESSAGE, DNS), { signatures: [], lookups: [] }, 'an unsigned message has no signatures');
});

t.test('the verifier fails what it must', async (t) => {
  for (const [key, selector] of [
    [rsa, 'rsa1'],
    [ed, 'ed1'],
  ] as const) {
    const signed = Buffer.concat([await pySign(MESSAGE, key, selector), MESSAGE]);

    const body = (await verifyDkim(tamperBody(signed), DNS)).signatures;
    t.equal(body[0]?.ok, false, `${key.algo}: changed body fails`);
    t.match(body[0]?.error, /body hash mismatch/);

    const head = (await verifyDkim(tamperSubject(signed), DNS)).signatures;
    t.equal(head[0]?.ok, false, `${key.algo}: changed signed header fails`);
    t.match(head[0]?.error, /does not verify/);

    const missing = (await verifyDkim(signed, {})).signatures;
    t.equal(missing[0]?.ok, false, `${key.algo}: missing key fails`);
    t.match(missing[0]?.error, /missing public key/);

    const other = newKey(key.algo);
    const wrong = (await verifyDkim(signed, { [`${selector}._domainkey.example.test`]: other.txt })).signatures;
    t.equal(wrong[0]?.ok, false, `${key.algo}: another key fails`);

    const relaxed = (await verifyDkim(signed, DNS)).signatures;
    t.equal(relaxed[0]?.ok, true, `${key.algo}: the control case passes`);
  }
});

t.test('mailauth signs (relaxed/relaxed), python verifies; python signs, mailauth verifies', async (t) => {
  for (const [key, selector, algorithm] of [
    [rsa, 'rsa1', 'rsa-sha256'],
    [ed, 'ed1', 'ed25519-sha256'],
  ] as const) {
    const { signatures, errors } = await dkimSign(MESSAGE, {
      canonicalization: 'relaxed/relaxed',
      signatureData: [
        {
          signingDomain: 'example.test',
          selector,
          privateKey: key.pem,
          algorithm,
          canonicalization: 'relaxed/relaxed',
        },
      ],
    } as Parameters<typeof dkimSign>[1]);
    t.same(errors, [], `${algorithm}: mailauth signed`);
    const signed = Buffer.concat([Buffer.from(signatures), MESSAGE]);
    t.same(
      (await verifyDkim(signed, DNS)).signatures,
      [{ domain: 'example.test', selector, algorithm, ok: true }],
      `${algorithm}: python agrees`,
    );
    t.equal(
      (await verifyDkim(tamperBody(signed), DNS)).signatures[0]?.ok,
      false,
      `${algorithm}: and fails it once changed`,
    );

    const pySigned = Buffer.concat([await pySign(MESSAGE, key, selector), MESSAGE]);
    const resolver = async (name: string, type: string) => {
      const txt = (DNS as Record<string, string>)[name];
      if (type !== 'TXT' || !txt) throw Object.assign(new Error(`no ${type} at ${name}`), { code: 'ENOTFOUND' });
      return [[txt]];
    };
    const mailauth = await dkimVerify(pySigned, { resolver });
    t.same(
      mailauth.results.map((r) => r.status?.result),
      ['pass'],
      `${algorithm}: mailauth verifies python's signature`,
    );
  }
});

t.test('pythonDkimSign refuses a key dkimpy cannot sign with', async (t) => {
  await t.rejects(
    pythonDkimSign(MESSAGE, {
      domain: 'example.test',
      selector: 's',
      privateKey: generateKeyPairSync('x25519').privateKey,
    }),
    /unsupported key type x25519/,
  );
});
