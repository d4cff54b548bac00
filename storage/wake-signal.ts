// A call within one process from what stored work to what takes it, so that the taker looks now instead of at its next
// poll: the control's accepted messages to the delivery worker (the spool's, docs/decisions.md #86), the MTA's new
// webhook attempts to the dispatcher (Storage.webhooksDue, #88). Nothing leaves the process: a taker elsewhere finds
// the work by its poll, as before.
export interface WakeSignal {
  /** Calls every listener now. */
  wake(): void;
  /** Calls `listener` at each wake(); the function returned stops that. */
  onWake(listener: () => void): () => void;
}

export function wakeSignal(): WakeSignal {
  const listeners = new Set<() => void>();
  return {
    wake() {
      for (const listener of listeners) listener();
    },
    onWake(listener) {
      // A registration of its own per call: stopping one leaves another of the same listener in place.
      const own = () => listener();
      listeners.add(own);
      return () => void listeners.delete(own);
    },
  };
}
