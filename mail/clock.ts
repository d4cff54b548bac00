// The clock every decision about time reads (docs/conventions.md #7): passed in, never read from a
// global, so that tests move time instead of waiting for it.
export interface Clock {
  /** Milliseconds since the Unix epoch. */
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };
