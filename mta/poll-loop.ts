// The loop the delivery worker and the webhook dispatcher share: one poll at a time, again at once
// when the poll says more work is waiting, else after `pollMs`; `schedule(0)` polls now, `wake()` polls now or
// right after the poll running, `stop()` ends it.
import type { Clock } from '../mail/clock.js';

export interface PollLoop {
  /** Polls after `ms` (replacing a poll already scheduled). */
  schedule(ms: number): void;
  /**
   * New work is waiting: polls now, or once the poll running now is done (that poll may have looked before the work
   * came, and would wait `pollMs`). Wakes before the poll they asked for begins are one: each replaces the timer.
   */
  wake(): void;
  /** Whether a poll is running now (stop() waits for it). */
  polling(): boolean;
  /** No more polls; one running now finishes. */
  stop(): void;
  /**
   * The clock's time when the last finished poll began, or null before the first: a poll that began at
   * or after T saw everything due at T. Tests wait on it instead of sleeping.
   */
  polledAt(): number | null;
}

/** `poll` resolves true when more work is due right away; it handles its own errors. */
export function pollLoop(poll: () => Promise<boolean>, pollMs: number, clock: Clock): PollLoop {
  let timer: NodeJS.Timeout | null = null;
  let running = false;
  let stopped = false;
  let polledAt: number | null = null;
  // A wake came while a poll ran.
  let again = false;

  function schedule(ms: number) {
    if (stopped) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(run, ms);
  }

  async function run() {
    timer = null;
    if (running || stopped) return;
    running = true;
    let more = false;
    const began = clock.now();
    try {
      more = await poll();
      polledAt = began;
    } finally {
      running = false;
      const now = more || again;
      again = false;
      schedule(now ? 0 : pollMs);
    }
  }

  return {
    schedule,
    wake() {
      if (stopped) return;
      if (running) again = true;
      else schedule(0);
    },
    polling: () => running,
    polledAt: () => polledAt,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
