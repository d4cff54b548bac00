// mail/generated-password.ts: inbox passwords of 96 bits or more, from an alphabet without look-alikes.
import t from 'tap';
import {
  GROUP_LENGTH,
  PASSWORD_ALPHABET,
  SYMBOLS,
  generatePassword,
  passwordEntropyBits,
} from '../../mail/generated-password.js';

t.test('the alphabet has no characters that read alike', async (t) => {
  for (const c of '0Oo1lIi') t.notOk(PASSWORD_ALPHABET.includes(c), c);
  t.equal(new Set(PASSWORD_ALPHABET).size, PASSWORD_ALPHABET.length, 'no symbol twice');
});

t.test('length, grouping and entropy', async (t) => {
  const p = generatePassword();
  const groups = p.split('-');
  t.equal(groups.length, SYMBOLS / GROUP_LENGTH);
  for (const g of groups) t.equal(g.length, GROUP_LENGTH);
  t.equal(p.length, SYMBOLS + groups.length - 1);
  const bits = SYMBOLS * Math.log2(PASSWORD_ALPHABET.length);
  t.equal(passwordEntropyBits(), bits);
  t.ok(bits >= 96, `${bits.toFixed(1)} bits`);
  t.ok((SYMBOLS - GROUP_LENGTH) * Math.log2(PASSWORD_ALPHABET.length) < 96, 'no longer than it needs to be');
});

t.test('10,000 passwords: only the alphabet, no repeats, every symbol used about evenly', async (t) => {
  const seen = new Set<string>();
  const counts = new Map<string, number>();
  const pattern = new RegExp(`^[${PASSWORD_ALPHABET}]{${GROUP_LENGTH}}(-[${PASSWORD_ALPHABET}]{${GROUP_LENGTH}})+$`);
  for (let i = 0; i < 10_000; i++) {
    const p = generatePassword();
    if (!pattern.test(p)) t.fail(`outside the alphabet: ${p}`);
    seen.add(p);
    for (const c of p.replaceAll('-', '')) counts.set(c, (counts.get(c) ?? 0) + 1);
  }
  t.equal(seen.size, 10_000);
  // 200,000 draws over 28 symbols: about 7,143 each, standard deviation about 83. A biased draw
  // (e.g. a byte modulo 28 favours the first 4 symbols by 1/9) lands far outside ±8%.
  const expected = (10_000 * SYMBOLS) / PASSWORD_ALPHABET.length;
  for (const c of PASSWORD_ALPHABET) {
    const n = counts.get(c) ?? 0;
    t.ok(Math.abs(n - expected) < expected * 0.08, `${c}: ${n} of about ${Math.round(expected)}`);
  }
});
