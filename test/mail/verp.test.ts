// mail/verp.ts: the VERP return path of docs/decisions.md #10 and #53,
// b-<message uuid without dashes>-<HMAC tag>@<return-path domain>.
import t from 'tap';
import { createHmac, randomUUID } from 'node:crypto';
import { decodeReturnPath as decodeWith, encodeReturnPath as encodeWith, returnPathMac } from '../../mail/verp.js';
import { createSealer } from '../../storage/secrets.js';

const ID = '3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b';
const mac = (p: string) => createHmac('sha256', 'test key').update(p).digest('hex');
const encodeReturnPath = (id: string, domain: string) => encodeWith(id, domain, mac);
const decodeReturnPath = (address: string) => decodeWith(address, mac);
const TAG = mac('verp:3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com').slice(0, 12);

t.test('encodes the message uuid without dashes at the return-path domain', async (t) => {
  t.equal(encodeReturnPath(ID, 'bounces.example.com'), `b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b-${TAG}@bounces.example.com`);
  t.equal(
    encodeReturnPath(ID.toUpperCase(), 'Bounces.Example.COM'),
    `b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b-${TAG}@bounces.example.com`,
    'lower case throughout',
  );
});

t.test('round trip', async (t) => {
  for (let i = 0; i < 50; i++) {
    const id = randomUUID();
    const address = encodeReturnPath(id, 'bounces.mail.example.org');
    t.same(decodeReturnPath(address), { messageId: id, domain: 'bounces.mail.example.org', signed: true });
  }
  t.same(
    decodeReturnPath(`B-3F1C2A9E5B7D4E8F9A0B1C2D3E4F5A6B-${TAG.toUpperCase()}@BOUNCES.Example.com`),
    { messageId: ID, domain: 'bounces.example.com', signed: true },
    'the local part is matched case-insensitively, the domain comes back lower-cased',
  );
});

t.test('the tag: made only with the key, bound to the id and the domain', async (t) => {
  const address = encodeReturnPath(ID, 'bounces.example.com');
  const otherKey = (p: string) => createHmac('sha256', 'another key').update(p).digest('hex');
  t.equal(decodeWith(address, otherKey)?.signed, false, 'another key: not ours');
  const flip = (c: string) => (c === '0' ? '1' : '0');
  const tampered = address.replace(/-([0-9a-f]{12})@/, (_, tag: string) => `-${flip(tag[0]!)}${tag.slice(1)}@`);
  t.equal(decodeReturnPath(tampered)?.signed, false, 'one digit of the tag changed');
  const otherId = address.replace('b-3f1c', 'b-3f1d');
  t.equal(decodeReturnPath(otherId)?.signed, false, 'the tag of one id does not sign another');
  const otherDomain = address.replace('@bounces.example.com', '@bounces.example.net');
  t.equal(decodeReturnPath(otherDomain)?.signed, false, 'nor another domain');
  t.same(
    decodeReturnPath('b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com'),
    { messageId: ID, domain: 'bounces.example.com', signed: null },
    'an address of before the tag: decoded, unsigned',
  );
  const sealer = createSealer(Buffer.alloc(32, 7));
  const a = encodeWith(ID, 'bounces.example.com', returnPathMac(sealer));
  t.equal(decodeWith(a, returnPathMac(sealer))?.signed, true, 'with the master key of storage/secrets.ts');
  t.equal(decodeWith(a, returnPathMac(createSealer(Buffer.alloc(32, 8))))?.signed, false, 'another master key');
});

t.test('encode refuses what is not a uuid or a host name', async (t) => {
  for (const id of ['', 'not-a-uuid', ID.replace(/-/g, ''), `${ID}x`, ` ${ID}`, ID.replace('3', 'g'), `${ID}\r\n`]) {
    t.throws(() => encodeReturnPath(id, 'bounces.example.com'), JSON.stringify(id));
  }
  for (const d of [
    '',
    'localhost',
    'bounces.example.com.',
    ' bounces.example.com',
    'bounces..example.com',
    'b_x.example.com',
    '1.2.3.4',
    'bounces.example.com\r\nX: y',
    'bücher.example',
    `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(57)}.com`,
  ]) {
    t.throws(() => encodeReturnPath(ID, d), JSON.stringify(d));
  }
});

t.test('decode refuses anything encode cannot have produced', async (t) => {
  const good = `b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b-${TAG}@bounces.example.com`;
  t.ok(decodeReturnPath(good), 'the control case decodes');
  const bad = [
    '',
    'bounces.example.com',
    '@bounces.example.com',
    'b-@bounces.example.com',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6@bounces.example.com', // 31 digits
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6bb@bounces.example.com', // 33 digits
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6g@bounces.example.com', // not hex
    'b-3f1c2a9e-5b7d-4e8f-9a0b-1c2d3e4f5a6b@bounces.example.com', // dashed
    'x-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com',
    'b3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b+tag@bounces.example.com',
    `b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b-${TAG}0@bounces.example.com`, // 13 tag digits
    `b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b-${TAG.slice(1)}@bounces.example.com`, // 11
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b-@bounces.example.com',
    'prefix.b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com',
    '"b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b"@bounces.example.com',
    '<b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com>',
    ' b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com ',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com.',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bounces.example.com\r\n',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@b@bounces.example.com',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@localhost',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@[127.0.0.1]',
    'b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@bücher.example',
  ];
  for (const a of bad) t.equal(decodeReturnPath(a), null, JSON.stringify(a));
  const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(30)}.com`;
  t.ok(`b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@${long}`.length > 254);
  t.equal(
    decodeReturnPath(`b-3f1c2a9e5b7d4e8f9a0b1c2d3e4f5a6b@${long}`),
    null,
    'over 254 octets (RFC 5321 §4.5.3.1.3)',
  );
  t.throws(() => encodeReturnPath(ID, long), 'encode refuses the same length');
  t.equal(decodeReturnPath(undefined as unknown as string), null);
});
