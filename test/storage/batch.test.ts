// storage/pg/batch.ts: calls made while a statement is in flight go together in the next one, calls made in
// one turn of the event loop go together, keyed items never share one, ALONE items and the items of a failed
// batch are decided one by one.
import t from 'tap';
import { ALONE, batched } from '../../storage/pg/batch.js';

const tick = () => new Promise((r) => setImmediate(r));

/** A batcher of at most 50 a statement, one in flight, that records each statement's items and answers f(x). */
function recording(f: (x: number) => number) {
  const batches: number[][] = [];
  const run = batched<number, number>(
    async (xs) => {
      batches.push(xs);
      await tick();
      return xs.map(f);
    },
    async () => {
      throw new Error('not used');
    },
    { max: 50, inFlight: 1 },
  );
  return { batches, run };
}

t.test('alone at low load, together under load, in order', async (t) => {
  const { batches, run } = recording((x) => x * 10);
  t.same(await run(1), 10, 'a lone call goes at once');
  const out = await Promise.all(Array.from({ length: 120 }, (_, i) => run(i)));
  t.same(
    out,
    Array.from({ length: 120 }, (_, i) => i * 10),
    'every caller gets its own answer',
  );
  t.same(
    batches.map((b) => b.length),
    [1, 50, 50, 20],
    'the first went alone; the rest waited and went in batches of at most 50',
  );
});

t.test('calls made in one turn share a statement, though the first found none in flight', async (t) => {
  const { batches, run } = recording((x) => x + 1);
  // As when one LMDB flush resolves many writes at once: each caller goes on in a microtask of its own, some
  // after more awaits than others, all before the turn ends.
  let flushed!: () => void;
  const flush = new Promise<void>((r) => (flushed = r));
  const callers = Array.from({ length: 8 }, async (_, i) => {
    await flush;
    for (let hop = 0; hop < i; hop++) await Promise.resolve();
    return run(i);
  });
  flushed();
  t.same(await Promise.all(callers), [1, 2, 3, 4, 5, 6, 7, 8], 'every caller gets its own answer');
  t.same(batches, [[0, 1, 2, 3, 4, 5, 6, 7]], 'one statement for the eight, not the first alone and seven after it');
  t.same(await run(9), 10, 'a lone call later still goes');
  t.same(batches.length, 2, 'in a statement of its own');
});

t.test('keyed items never share a batch; inFlight bounds the statements at once', async (t) => {
  let open = 0;
  let maxOpen = 0;
  const seen: string[][] = [];
  const run = batched<{ key: string; v: number }, number>(
    async (xs) => {
      open++;
      maxOpen = Math.max(maxOpen, open);
      seen.push(xs.map((x) => x.key));
      await tick();
      open--;
      return xs.map((x) => x.v);
    },
    async () => {
      throw new Error('not used');
    },
    { max: 100, inFlight: 2, keyOf: (x) => x.key },
  );
  const items = Array.from({ length: 60 }, (_, i) => ({ key: `k${i % 3}`, v: i }));
  t.same(
    await Promise.all(items.map(run)),
    items.map((x) => x.v),
  );
  t.ok(
    seen.every((keys) => new Set(keys).size === keys.length),
    'no key twice in one batch',
  );
  t.equal(maxOpen, 2, 'two statements in flight at most');
});

t.test('ALONE and a failed batch fall back to one call per item; one bad item fails alone', async (t) => {
  const ones: number[] = [];
  const run = batched<number, string>(
    async (xs) => {
      await tick();
      if (xs.includes(13)) throw new Error('a bad row fails the statement');
      return xs.map((x) => (x % 2 ? ALONE : `many ${x}`));
    },
    async (x) => {
      ones.push(x);
      if (x === 13) throw new Error('thirteen');
      return `one ${x}`;
    },
    { max: 20, inFlight: 1 },
  );
  t.same(await Promise.all([run(2), run(3)]), ['many 2', 'one 3'], 'even by the batch, odd (ALONE) one by one');
  const out = await Promise.allSettled(Array.from({ length: 12 }, (_, i) => run(i + 2)));
  const v = out.map((o) => (o.status === 'fulfilled' ? o.value : (o.reason as Error).message));
  t.same(
    v,
    [...Array.from({ length: 11 }, (_, i) => `one ${i + 2}`), 'thirteen'],
    'their batch failed: each item decided alone, the bad one fails alone',
  );
  t.ok(ones.includes(12) && ones.includes(4), 'even items too');
});
