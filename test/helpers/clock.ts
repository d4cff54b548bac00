// A controllable clock: real time plus an offset the test moves, or frozen at a fixed instant.
import type { Clock } from '../../config/context.js';

export interface TestClock extends Clock {
  advance(ms: number): void;
  freeze(atMs?: number): void;
}

export function testClock(): TestClock {
  let offset = 0;
  let frozen: number | null = null;
  return {
    now: () => frozen ?? Date.now() + offset,
    advance(ms) {
      if (frozen !== null) frozen += ms;
      else offset += ms;
    },
    freeze(atMs) {
      frozen = atMs ?? Date.now() + offset;
    },
  };
}
