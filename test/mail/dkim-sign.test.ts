// Our signer (mailauth's canonicalization, a cached KeyObject) against mailauth's own dkimSign.
import t from 'tap';
import { createPrivateKey } from 'node:crypto';
import { createRequire } from 'node:module';
import { generateDkimKey } from '../../mail/dkim-keys.js';
import { dkimSign, dkimSignatures, DkimSignError, SIGNED_HEADERS } from '../../mail/dkim-sign.js';

const require = createRequire(import.meta.url);
const { dkimSign: mailauthSign } = require('mailauth/lib/dkim/sign.js') as {
  dkimSign(input: Buffer, o: unknown): Promise<{ signatures: string; errors: unknown[] }>;
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

for (const algorithm of ['rsa', 'ed25519'] as const) {
  t.test(`${algorithm}: byte-identical to mailauth's dkimSign`, async (t) => {
    const k = await generateDkimKey(algorithm);
    const ours = dkimSignatures(
      message,
      [{ domain: 'example.test', selector: k.selector, key: createPrivateKey(k.privatePem) }],
      signTime,
    );
    const theirs = await mailauthSign(message, {
      canonicalization: 'relaxed/relaxed',
      signTime: new Date(signTime),
      headerList: SIGNED_HEADERS,
      signatureData: [
        {
          signingDomain: 'example.test',
          selector: k.selector,
          privateKey: k.privatePem,
          algorithm: `${algorithm}-sha256`,
        },
      ],
    });
    t.same(theirs.errors, []);
    t.equal(ours.toString(), theirs.signatures);
    // h= lists the signed fields bottom-up, as mailauth orders them.
    const h = /\bh=([^;]+);/
      .exec(ours.toString().replace(/\r\n\s+/g, ' '))?.[1]
      ?.split(':')
      .map((s) => s.trim().toLowerCase())
      .sort();
    t.same(
      h,
      'From:To:Subject:Date:Message-ID:MIME-Version:Content-Type'.toLowerCase().split(':').sort(),
      'the seven fields of issue 5, those the message has',
    );
    t.notMatch(ours.toString(), /X-Not-Signed/i);
  });
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
