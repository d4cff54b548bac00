// mail/header-keys.ts replaces MimeNode's header-name normalization with one that remembers its answers: every
// answer must be the unpatched method's (nodemailer's CommonJS build, a separate copy of the class that the patch of
// the ESM build does not reach), for the names composition uses, odd names, and more names than are kept.
import t from 'tap';
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import { compileMessage } from '../../mail/compose.js';
import { normalizeHeaderKey } from '../../mail/header-keys.js';

const require = createRequire(import.meta.url);
const Pristine = require('nodemailer/lib/mime-node') as new () => { _normalizeHeaderKey(key: unknown): string };
const pristine = new Pristine();

t.test("the CommonJS build's method is the original", async (t) => {
  t.not(pristine._normalizeHeaderKey, normalizeHeaderKey);
});

t.test('composed parts call the remembering method', async (t) => {
  const root = compileMessage({
    from: { name: 'A', address: 'a@example.test' },
    to: 'b@dest.test',
    subject: 'Hi',
    text: 'hello',
    html: '<p>hello</p>',
    messageId: 'x@example.test',
    date: new Date(0),
  }) as unknown as { _normalizeHeaderKey: unknown; childNodes: { _normalizeHeaderKey: unknown }[] };
  t.equal(root._normalizeHeaderKey, normalizeHeaderKey);
  t.equal(root.childNodes[0]!._normalizeHeaderKey, normalizeHeaderKey);
});

t.test("every answer, asked once or again, is the original method's", async (t) => {
  const names = [
    'content-type',
    'Content-Transfer-Encoding',
    'MIME-Version',
    'mime-version',
    'message-id',
    'X-SMTPAPI',
    'x-smtpapi',
    'dkim-signature',
    'ARC-Seal',
    'bimi-selector',
    'OTP-Token',
    'otp-token',
    'Received-SPF',
    'x-fbl',
    'x-message-id',
    'content-md5',
    'Content-Features',
    'list-unsubscribe-post',
    'Feedback-ID',
    'From: ceo@example.test (',
    ' Subject ',
    'X\r\nBcc',
    'x\u0000y',
    'x\u007fy',
    '',
    'É-header',
    'a--b',
    '-x',
  ];
  const random = Array.from({ length: 2000 }, () =>
    String.fromCharCode(...randomBytes(1 + (randomBytes(1)[0]! % 24)).map((b) => (b % 3 ? 0x41 + (b % 58) : b % 128))),
  );
  let wrong = 0;
  for (const round of [1, 2])
    for (const key of [...names, ...random, undefined, null, 42]) {
      const got = normalizeHeaderKey.call(null, key);
      const want = pristine._normalizeHeaderKey(key);
      if (got !== want) {
        wrong++;
        if (wrong < 5) t.equal(got, want, `round ${round}: ${JSON.stringify(key)}`);
      }
    }
  t.equal(wrong, 0, 'no answer differs');
});
