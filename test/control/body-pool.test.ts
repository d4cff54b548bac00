// control/middleware/body-pool.ts: request bodies read into buffers used again (docs/decisions.md #84).
import t from 'tap';
import { bytePool, POOLED_MAX_BYTES, POOLED_MIN_BYTES } from '../../control/middleware/body-pool.js';

t.test('sizes outside the pooled ones are not lent', async (t) => {
  const pool = bytePool(1024 * 1024);
  t.equal(pool.take(POOLED_MIN_BYTES - 1), undefined, 'under the smallest class');
  t.equal(pool.take(POOLED_MAX_BYTES + 1), undefined, 'over the largest');
  t.equal(pool.take(POOLED_MIN_BYTES)?.bytes.length, POOLED_MIN_BYTES, 'the smallest class itself');
  t.equal(pool.take(POOLED_MAX_BYTES)?.bytes.length, POOLED_MAX_BYTES, 'the largest itself');
});

t.test('a buffer given back is lent again for a body of its class, and only once', async (t) => {
  const pool = bytePool(1024 * 1024);
  const a = pool.take(100_000)!;
  t.equal(a.bytes.length, 100_000, 'as many octets as asked');
  const b = pool.take(100_000)!;
  t.not(b.bytes.buffer, a.bytes.buffer, 'two bodies at once get two buffers');
  a.release();
  a.release();
  t.equal(pool.idleBytes, 128 * 1024, 'given back once, however often released');
  const c = pool.take(70_000)!;
  t.equal(c.bytes.buffer, a.bytes.buffer, 'a body of the same class gets it again');
  t.equal(c.bytes.length, 70_000, 'viewed at its own length');
  const d = pool.take(70_000)!;
  t.not(d.bytes.buffer, a.bytes.buffer, 'and no one else while it is lent');
  t.equal(pool.idleBytes, 0, 'none idle');
  const e = pool.take(20_000)!;
  t.not(e.bytes.buffer, b.bytes.buffer, 'another class never gets it');
});

t.test('no more than keepBytes wait idle', async (t) => {
  const pool = bytePool(3 * 64 * 1024);
  const lent = Array.from({ length: 5 }, () => pool.take(60_000)!);
  for (const l of lent) l.release();
  t.equal(pool.idleBytes, 3 * 64 * 1024, 'three of five kept, the rest dropped');
  const again = Array.from({ length: 4 }, () => pool.take(60_000)!);
  const reused = again.filter((x) => lent.some((l) => l.bytes.buffer === x.bytes.buffer));
  t.equal(reused.length, 3, 'the kept ones are lent again, then new ones');
});
