// The loop the delivery worker and the webhook dispatcher share: one poll at a time, again at once
// when the poll says more work is waiting, else after `pollMs`; `kick()` polls now, `stop()` ends it.
export interface PollLoop {
  /** Polls after `ms` (replacing a poll already scheduled). */
  schedule(ms: number): void;
  /** Whether a poll is running now (stop() waits for it). */
  polling(): boolean;
  /** No more polls; one running now finishes. */
  stop(): void;
}

/** `poll` resolves true when more work is due right away; it handles its own errors. */
export function pollLoop(poll: () => Promise<boolean>, pollMs: number): PollLoop {
  let timer: NodeJS.Timeout | null = null;
  let running = false;
  let stopped = false;

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
    try {
      more = await poll();
    } finally {
      running = false;
      schedule(more ? 0 : pollMs);
    }
  }

  return {
    schedule,
    polling: () => running,
    stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
    },
  };
}
