// A seeded pseudo-random source for the tests that compare our code with a library's on random input: the same
// seed gives the same inputs on every run, so a failure can be run again as it was.
export function seeded(seed: number): () => number {
  return () => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff;
}

/** Up to `max` - 1 of `pieces`, each drawn from `rnd`, one after another. */
export function randomOf(rnd: () => number, pieces: readonly string[], max: number): string {
  let s = '';
  for (let n = Math.floor(rnd() * max); n > 0; n--) s += pieces[Math.floor(rnd() * pieces.length)];
  return s;
}
