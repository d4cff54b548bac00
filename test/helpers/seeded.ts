// A seeded pseudo-random source for the tests that compare our code with a library's on random input: the same
// seed gives the same inputs on every run, so a failure can be run again as it was.
export function seeded(seed: number): () => number {
  return () => (seed = (Math.imul(seed, 1103515245) + 12345) & 0x7fffffff) / 0x7fffffff;
}
