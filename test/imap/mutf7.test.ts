// imap/mutf7.ts: modified UTF-7 mailbox names (RFC 3501 §5.1.3), its examples and the strings a
// conforming encoder never writes.
import t from 'tap';
import { decodeMutf7, encodeMutf7 } from '../../imap/mutf7.js';

t.test('the RFC 3501 §5.1.3 example and friends round-trip', async (t) => {
  const pairs: [string, string][] = [
    ['~peter/mail/台北/日本語', '~peter/mail/&U,BTFw-/&ZeVnLIqe-'],
    ['INBOX', 'INBOX'],
    ['&', '&-'],
    ['Tom & Jerry', 'Tom &- Jerry'],
    ['☺!', '&Jjo-!'],
    ['Hi Mom -☺-!', 'Hi Mom -&Jjo--!'],
    ['Entwürfe', 'Entw&APw-rfe'],
    ['Отправленные', '&BB4EQgQ,BEAEMAQyBDsENQQ9BD0ESwQ1-'],
    ['😀 mail', '&2D3eAA- mail'], // a surrogate pair
    ['a\tb', 'a&AAk-b'], // control characters are not printable ASCII
    ['', ''],
  ];
  for (const [name, wire] of pairs) {
    t.equal(encodeMutf7(name), wire, `encode ${JSON.stringify(name)}`);
    t.equal(decodeMutf7(wire), name, `decode ${wire}`);
  }
});

t.test('strings no RFC 3501 §5.1.3 encoder writes are refused', async (t) => {
  const bad = [
    '&', // unterminated shift
    '&U,BTFw', // unterminated
    '&AGE-', // "a" encoded: printable ASCII must stand for itself
    '&ACY-', // "&" encoded instead of "&-"
    '&U,BTF-', // leftover bits are not zero
    '&AA-', // half a UTF-16 unit
    '&2D3-', // a lone high surrogate (and bad padding)
    '&2D0-', // half a unit
    '&3gA-', // a lone low surrogate
    '&U/BTFw-', // "/" is not in modified BASE64
    '&U,BTFw=-', // no padding
    'caf\u00e9', // 8-bit is not modified UTF-7
    'a\nb',
  ];
  for (const s of bad) t.equal(decodeMutf7(s), null, JSON.stringify(s));
});

t.test('every BMP character and some astral ones round-trip', async (t) => {
  let failures = 0;
  for (let cp = 0; cp < 0x10000; cp += 7) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    const s = `x${String.fromCodePoint(cp)}${String.fromCodePoint((cp * 13) % 0xd000)}y`;
    if (decodeMutf7(encodeMutf7(s)) !== s) failures++;
  }
  for (const cp of [0x10000, 0x1f600, 0x10ffff]) {
    const s = String.fromCodePoint(cp).repeat(3);
    if (decodeMutf7(encodeMutf7(s)) !== s) failures++;
  }
  t.equal(failures, 0);
});
