// The platform DKIM keys (storage/platform-dkim.ts, migration 0020): made once per notify domain, the same for
// every process sharing the database (two starting together agree on one key), sealed at rest, and readable
// without the master key for `svc doctor --platform`. On the embedded database, and on a fresh real Postgres one
// when SVC_DATABASE_URL is set for the run.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { createSealer } from '../../storage/secrets.js';
import { ensurePlatformKeys, platformKeys } from '../../storage/platform-dkim.js';
import { publicKeyValue } from '../../mail/dkim-keys.js';
import { openTestDb } from '../helpers/database.js';

t.test('made once, shared, sealed', async (t) => {
  const db = await openTestDb(t);
  const sealer = createSealer(randomBytes(32));
  const now = new Date();
  t.same(await platformKeys(db, 'notify.test'), [], 'none before the first start');

  // Two MTA nodes starting together: both make keys, the table keeps one of each algorithm, both sign with it.
  const [a, b] = await Promise.all([
    ensurePlatformKeys({ db, sealer }, 'notify.test', now),
    ensurePlatformKeys({ db, sealer }, 'notify.test', now),
  ]);
  t.same(
    a.map((k) => [k.algorithm, k.selector, k.host]),
    [
      ['rsa', 'svc1', 'svc1._domainkey.notify.test'],
      ['ed25519', 'svc1e', 'svc1e._domainkey.notify.test'],
    ],
  );
  t.same(b, a, 'the second process got the same keys');
  for (const k of a) t.equal(publicKeyValue(k.algorithm, k.privatePem), k.publicKey, `${k.algorithm}: a pair`);
  t.match(a[0]!.txt, /^v=DKIM1; k=rsa; p=MII/);
  t.same(await ensurePlatformKeys({ db, sealer }, 'notify.test', now), a, 'later starts read them');
  t.same(
    await platformKeys(db, 'notify.test'),
    a.map(({ privatePem: _, ...k }) => k),
    'the public side, without the master key',
  );

  const rows = await db.query<{ private_sealed: string }>('SELECT private_sealed FROM platform_dkim_keys');
  t.notOk(
    rows.some((r) => r.private_sealed.includes('PRIVATE KEY')),
    'private keys sealed at rest',
  );
  await t.rejects(
    ensurePlatformKeys({ db, sealer: createSealer(randomBytes(32)) }, 'notify.test', now),
    'another master key does not open them',
  );

  const other = await ensurePlatformKeys({ db, sealer }, 'other.test', now);
  t.not(other[0]!.publicKey, a[0]!.publicKey, 'another notify domain has keys of its own');
});
