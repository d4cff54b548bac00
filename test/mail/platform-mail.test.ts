// The headers that make a message platform mail (mail/platform-mail.ts): the From with its display name, quoted or
// encoded as RFC 5322 §3.2.4 and RFC 2047 want it, and Auto-Submitted (RFC 3834 §5), also on a message a producer
// built whole (a TLS report), whose other fields and body stay as they were.
import t from 'tap';
import { decodeWords, firstField, parseHeaderBlock } from '../../mail/mime-header.js';
import { formatMailbox, platformReturnPath, withPlatformHeaders } from '../../mail/platform-mail.js';

t.test('formatMailbox', async (t) => {
  t.equal(formatMailbox({ name: null, address: 'a@example.test' }), 'a@example.test');
  t.equal(formatMailbox({ name: 'Example Cloud', address: 'a@example.test' }), 'Example Cloud <a@example.test>');
  t.equal(formatMailbox({ name: 'mx.example "x"', address: 'a@e.test' }), '"mx.example \\"x\\"" <a@e.test>');
  const encoded = formatMailbox({ name: 'Exämple', address: 'a@e.test' });
  t.match(encoded, /^=\?UTF-8\?B\?[A-Za-z0-9+/=]+\?= <a@e\.test>$/, 'non-ASCII: an encoded word');
  t.throws(() => formatMailbox({ name: 'a\r\nBcc: x@e.test', address: 'a@e.test' }));
  t.equal(platformReturnPath('notify.example.test'), 'bounces@notify.example.test');
});

t.test('withPlatformHeaders: From replaced (folded too), Auto-Submitted added once, the rest untouched', async (t) => {
  const body = '--b\r\nContent-Type: text/plain\r\n\r\nhello\r\n--b--\r\n';
  const raw = Buffer.from(
    'From: no-reply@example.test\r\n (old comment)\r\nTo: x@dest.test\r\nSubject: Report\r\n' +
      'Content-Type: multipart/report; report-type="tlsrpt";\r\n boundary="b"\r\n\r\n' +
      body,
  );
  const out = withPlatformHeaders(raw, { name: 'Exämple Cloud', address: 'no-reply@example.test' });
  const text = out.toString('latin1');
  t.equal(text.match(/^From:/gm)?.length, 1, 'one From');
  t.notMatch(text, /old comment/, 'its folded line went with it');
  t.match(text, /^Auto-Submitted: auto-generated\r$/m);
  t.ok(text.endsWith(`\r\n\r\n${body}`), 'the body is untouched');
  t.match(text, /^Content-Type: multipart\/report; report-type="tlsrpt";\r\n boundary="b"\r$/m, 'folds kept');
  const fields = parseHeaderBlock(out.subarray(0, out.indexOf('\r\n\r\n') + 2));
  t.equal(decodeWords(firstField(fields, 'from') ?? ''), 'Exämple Cloud <no-reply@example.test>', 'the name decodes');
  t.equal(firstField(fields, 'auto-submitted'), 'auto-generated');

  const again = withPlatformHeaders(out, { name: 'Exämple Cloud', address: 'no-reply@example.test' });
  t.equal(again.toString('latin1').match(/^Auto-Submitted:/gm)?.length, 1, 'not added twice');
});
