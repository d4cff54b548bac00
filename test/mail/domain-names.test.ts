// control/domain-names.ts: the one normalization of host names (lower case, no trailing dot,
// punycode) and the host name rules every domain route applies.
import { isIP } from 'node:net';
import { domainToASCII } from 'node:url';
import t from 'tap';
import { asciiHost, normalizeDomain, MAX_DOMAIN_LENGTH } from '../../mail/domain-names.js';

t.test('normalizes: trims, lower-cases, drops one trailing dot', async (t) => {
  t.equal(normalizeDomain('example.com'), 'example.com');
  t.equal(normalizeDomain('  Mail.Example.COM.  '), 'mail.example.com');
  t.equal(normalizeDomain('a.b.c.d.example.test'), 'a.b.c.d.example.test');
  t.equal(normalizeDomain('1password.example'), '1password.example', 'a label may start with a digit (RFC 1123 §2.1)');
  t.equal(normalizeDomain('ab--cd.example'), 'ab--cd.example', 'inner double hyphen');
  t.equal(normalizeDomain('example.com..'), null, 'only one trailing dot is removed');
  t.equal(normalizeDomain('.'), null);
  t.equal(normalizeDomain(''), null);
  t.equal(normalizeDomain('   '), null);
});

t.test('IDN labels become punycode; A-labels pass through; bad punycode is refused', async (t) => {
  t.equal(normalizeDomain('Bücher.example'), 'xn--bcher-kva.example');
  t.equal(normalizeDomain('post.BÜCHER.example.'), 'post.xn--bcher-kva.example');
  t.equal(normalizeDomain('xn--bcher-kva.example'), 'xn--bcher-kva.example', 'already punycode');
  t.equal(normalizeDomain('例え.テスト'), 'xn--r8jz45g.xn--zckzah');
  t.equal(normalizeDomain('example。com'), 'example.com', 'UTS #46 maps the ideographic full stop');
  t.equal(normalizeDomain('ＥＸＡＭＰＬＥ.com'), 'example.com', 'UTS #46 maps full-width letters');
  t.equal(normalizeDomain('xn--zz.example'), null, 'invalid punycode');
  t.equal(normalizeDomain('⒈.example'), null, 'a code point IDNA disallows');
});

t.test('refuses what is not a host name', async (t) => {
  const bad = [
    '-bad.example',
    'bad-.example',
    'a..b',
    '.example.com',
    'localhost',
    'com',
    'under_score.example',
    'sp ace.example',
    'ex%41mple.com',
    'user@example.com',
    'example.com/path',
    'example.com:443',
    'http://example.com',
    '*.example.com',
  ];
  for (const s of bad) t.equal(normalizeDomain(s), null, JSON.stringify(s));
});

t.test('refuses IP addresses in every spelling', async (t) => {
  for (const s of [
    '1.2.3.4',
    '127.0.0.1',
    '1.2.3',
    '0x7f.1',
    '999.999.999.999',
    '::1',
    '[::1]',
    '2001:db8::1',
    '::ffff:1.2.3.4',
    // Full-width colons and dots, which IDNA maps to ASCII ones.
    '2001\uff1adb8\uff1a\uff1a1',
    '1\uff0e2\uff0e3\uff0e4',
    'example.123',
  ]) {
    t.equal(normalizeDomain(s), null, JSON.stringify(s));
  }
});

t.test('length limits: labels of 63, names of 253', async (t) => {
  const l63 = 'a'.repeat(63);
  t.equal(normalizeDomain(`${l63}.example`), `${l63}.example`, '63-character label');
  t.equal(normalizeDomain(`${'a'.repeat(64)}.example`), null, '64-character label');
  // 4 × 63 + 3 dots = 255; trim the first label to land on exactly 253 and 254.
  const name = (first: number) => [`${'b'.repeat(first)}`, l63, l63, l63].join('.');
  t.equal(name(61).length, MAX_DOMAIN_LENGTH);
  t.equal(normalizeDomain(name(61)), name(61), '253 characters');
  t.equal(normalizeDomain(name(62)), null, '254 characters');
  t.equal(normalizeDomain(`${name(61)}.`), name(61), '253 characters plus the root dot');
  t.equal(normalizeDomain('x'.repeat(300)), null, '300 characters, one label');
  t.equal(normalizeDomain(`${'abcdefghi.'.repeat(30)}test`), null, '304 characters of valid labels');
  t.equal(normalizeDomain(`${'a'.repeat(100_000)}.example`), null, 'very long input');
  // An IDN name whose punycode form is too long, though its Unicode form is short.
  t.equal(normalizeDomain(`${'ü'.repeat(60)}.example`), null, 'label over 63 once in punycode');
});

t.test('pure and stable: normalizing twice changes nothing', async (t) => {
  for (const s of ['Mail.Example.COM.', 'Bücher.example', '例え.テスト']) {
    const once = normalizeDomain(s);
    t.equal(normalizeDomain(once as string), once, s);
  }
});

t.test('asciiHost gives what the URL host parser gives, on every name of up to 6 such characters', async (t) => {
  // Letters that make hex numbers (0x…), A-label prefixes (xn--) and plain labels; digits that make decimal and
  // invalid octal numbers (09); hyphens and dots, empty labels and trailing dots among them.
  const alphabet = ['a', 'f', 'n', 'x', '0', '1', '9', '-', '.'];
  let names = [''];
  let checked = 0;
  const wrong: string[] = [];
  for (let length = 1; length <= 6; length++) {
    names = names.flatMap((name) => alphabet.map((c) => name + c));
    for (const name of names) {
      checked++;
      const parser = domainToASCII(name);
      // An IPv4 address the parser rewrites ('0x7f.1' → '127.0.0.1'): both end refused (an IP, a numeric label).
      const same = asciiHost(name) === parser || (isIP(parser) === 4 && asciiHost(name) === '');
      if (!same && wrong.length < 10) wrong.push(name);
    }
  }
  t.same(wrong, [], `${checked} names`);
  t.equal(normalizeDomain('a.0x1f'), null, 'a hex number as the last label');
  t.equal(normalizeDomain('a.0x1g'), 'a.0x1g', 'not a number');
  t.equal(normalizeDomain('0x7f.0.0.1'), null);
});
