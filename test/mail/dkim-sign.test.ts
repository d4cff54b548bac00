// Our signer (mailauth's canonicalization, a cached KeyObject, oversigned h=) checked by two verifiers:
// mailauth's own and python3-dkim.
import t from 'tap';
import { createPrivateKey } from 'node:crypto';
import { createRequire } from 'node:module';
import { generateDkimKey } from '../../mail/dkim-keys.js';
import { dkimSign, dkimSignatures, DkimSignError, OVERSIGNED_HEADERS } from '../../mail/dkim-sign.js';
import { dkimTxtValue } from '../../mail/dkim-keys.js';
import { verifyDkim } from '../helpers/dkim-verify.js';

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
      const signed = dkimSign(
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
  const signed = dkimSign(
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

t.test('fails closed', async (t) => {
  t.throws(() => dkimSignatures(message, [], signTime), DkimSignError);
  const { privateKey } = await import('node:crypto').then((c) => c.generateKeyPairSync('ec', { namedCurve: 'P-256' }));
  t.throws(
    () => dkimSignatures(message, [{ domain: 'example.test', selector: 's', key: privateKey }], signTime),
    DkimSignError,
  );
  const k = await generateDkimKey('rsa');
  t.throws(
    () =>
      dkimSignatures(
        Buffer.from('Subject: x\r\n\r\nbody'),
        [{ domain: 'example.test', selector: 's', key: createPrivateKey(k.privatePem) }],
        signTime,
      ),
    /no From/,
  );
});
