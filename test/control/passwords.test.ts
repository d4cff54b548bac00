// Password hashes (docs/decisions.md #12): scrypt at N=2^15 by default; the cost travels with each hash, so a
// hash made at another cost (tests use 2^10) verifies the same way.
import t from 'tap';
import { hashPassword, verifyPassword, unusableHash, LOG_N } from '../../core/passwords.js';

t.test('production cost by default, any stored cost verifies, nothing else does', async (t) => {
  t.equal(LOG_N, 15);
  const strong = await hashPassword('correct horse battery');
  t.match(strong, /^scrypt\$15\$8\$1\$/);
  t.ok(await verifyPassword('correct horse battery', strong));
  const cheap = await hashPassword('correct horse battery', 10);
  t.match(cheap, /^scrypt\$10\$8\$1\$/);
  t.ok(await verifyPassword('correct horse battery', cheap));
  t.notOk(await verifyPassword('correct horse batterY', cheap));
  t.notOk(await verifyPassword('', unusableHash()));
  t.notOk(await verifyPassword('x', 'md5$abc'));
});
