// Group commit for hot statements: calls that arrive while earlier statements are in flight wait and
// then go together, as one statement over arrays. A call that finds none in flight goes at the end of the
// event loop's turn (setImmediate), with every call made in that turn: alone (low load) that adds no
// wait for anything, and under load the continuations of one shared flush (an LMDB group commit, the
// requests read from one poll) share a statement instead of the first going alone and the rest waiting a
// whole round trip for it (docs/decisions.md #26). Each round trip carries everything queued since the
// last one, so the cost per call in Node (a socket write, a result to parse) and in Postgres (a
// statement, a commit) is shared.

/** What a batch returns for an item it could not decide together with the others. */
export const ALONE = Symbol('alone');

export interface BatchOptions<I> {
  /** Most items per statement. */
  max: number;
  /** Most statements in flight at once (each holds a pool connection). */
  inFlight: number;
  /** Items with the same key never share a statement (e.g. one row updated twice is an error). */
  keyOf?: (item: I) => string;
}

interface Waiting<I, O> {
  item: I;
  resolve(o: O): void;
  reject(err: unknown): void;
}

/**
 * `many` runs a batch in one statement and answers per item, in order, or ALONE for an item that
 * `one` must decide by itself. When `many` throws, every item of its batch is retried through `one`,
 * so that one bad item fails alone.
 */
export function batched<I, O>(
  many: (items: I[]) => Promise<(O | typeof ALONE)[]>,
  one: (item: I) => Promise<O>,
  o: BatchOptions<I>,
): (item: I) => Promise<O> {
  const queue: Waiting<I, O>[] = [];
  let running = 0;
  // A drain is set to start at the end of this turn.
  let starting = false;

  const take = (): Waiting<I, O>[] => {
    if (!o.keyOf) return queue.splice(0, o.max);
    const keys = new Set<string>();
    const batch: Waiting<I, O>[] = [];
    for (let i = 0; i < queue.length && batch.length < o.max;) {
      const key = o.keyOf(queue[i]!.item);
      if (keys.has(key)) {
        i++;
        continue;
      }
      keys.add(key);
      batch.push(...queue.splice(i, 1));
    }
    return batch;
  };

  const settle = (w: Waiting<I, O>) => one(w.item).then(w.resolve, w.reject);

  async function drain(): Promise<void> {
    running++;
    try {
      for (let batch = take(); batch.length; batch = take()) {
        let out: (O | typeof ALONE)[];
        try {
          out = await many(batch.map((w) => w.item));
        } catch {
          await Promise.all(batch.map(settle));
          continue;
        }
        const alone: Waiting<I, O>[] = [];
        batch.forEach((w, i) => {
          const r = out[i];
          if (r === ALONE || r === undefined) alone.push(w);
          else w.resolve(r);
        });
        await Promise.all(alone.map(settle));
      }
    } finally {
      running--;
    }
  }

  return (item) =>
    new Promise<O>((resolve, reject) => {
      queue.push({ item, resolve, reject });
      if (running < o.inFlight && !starting) {
        starting = true;
        setImmediate(() => {
          starting = false;
          while (running < o.inFlight && queue.length) void drain();
        });
      }
    });
}
