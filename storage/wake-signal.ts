// A call from what stored work to what takes it, so that the taker looks now instead of at its next poll: the
// control's accepted messages to the delivery worker (the spool's, docs/decisions.md #86), the writers of events to
// the webhook dispatcher (Storage.webhooksDue, #88). Within a process it is a function call. Given a file (in the data
// directory, which the processes of one host share with the spool), a wake that no listener of its own process hears
// touches the file, and the listeners of every other process on that file are called by the kernel's note of the
// touch (inotify, through fs.watch): a control running alone (svc@control) wakes the MTA beside it (svc@mta). A wake
// is a hint: one lost (a watch that failed, a file on a file system that sends no notes) leaves the taker to its poll.
import { closeSync, mkdirSync, openSync, utimesSync, watch, type FSWatcher } from 'node:fs';
import path from 'node:path';

export interface WakeSignal {
  /**
   * Calls every listener of this process now; where there is none, tells the other processes on the signal's file,
   * if it has one.
   */
  wake(): void;
  /** Calls `listener` at each wake(), this process's or (with a file) another's; the function returned stops that. */
  onWake(listener: () => void): () => void;
}

/** `wakeFile`: where the processes sharing it hear each other's wakes (made with its folder); none: this process. */
export function wakeSignal(wakeFile: string | null = null): WakeSignal {
  const file = wakeFile && made(wakeFile) ? wakeFile : null;
  const listeners = new Set<() => void>();
  let watcher: FSWatcher | null = null;
  // A touch is due (at the end of this turn of the event loop, or TOUCH_GAP_MS after the last one): the sends that one
  // accepting statement answers all wake within a turn, and a busy control commits a statement every few milliseconds.
  let touching = false;
  let touchedAt = -Infinity;
  const callAll = () => {
    for (const listener of listeners) listener();
  };
  const unwatch = () => {
    watcher?.close();
    watcher = null;
  };
  return {
    wake() {
      if (listeners.size > 0) callAll();
      else if (file && !touching) {
        touching = true;
        const touchNow = () => {
          touching = false;
          touchedAt = performance.now();
          touch(file);
        };
        const wait = touchedAt + TOUCH_GAP_MS - performance.now();
        // Unreferenced: a touch still due does not hold a process that is ending (#80); its wake is a hint.
        if (wait > 0) setTimeout(touchNow, wait).unref();
        else setImmediate(touchNow);
      }
    },
    onWake(listener) {
      // A registration of its own per call: stopping one leaves another of the same listener in place.
      const own = () => listener();
      listeners.add(own);
      if (file && !watcher) {
        try {
          // Not persistent: a watch alone does not keep the process running (#80). A 'change' is the touch's
          // attribute change (IN_ATTRIB); a 'rename' (the file replaced or removed) ends what the watch can hear.
          watcher = watch(file, { persistent: false }, (event) => (event === 'change' ? callAll() : unwatch()));
          watcher.on('error', unwatch);
        } catch {
          // No watch (inotify's limit of watches reached, say): the poll finds the work.
          watcher = null;
        }
      }
      return () => {
        listeners.delete(own);
        if (listeners.size === 0) unwatch();
      };
    },
  };
}

/**
 * The least time between two touches of one signal's file: the delivery worker's poll (100 ms, docs/decisions.md #86),
 * so that a busy control wakes the MTA no more often than the MTA looks anyway, and a lone wake, on a quiet host, goes
 * at once. Touched at each statement of a busy control, the MTA leased messages in smaller batches, each lease a
 * synced write, and no run came out faster (#89 has the figures).
 */
const TOUCH_GAP_MS = 100;

/**
 * Whether the file is there, made with its folder where missing. Not made (a folder this process may not write, say
 * one that a command run as another user made): the signal stays within the process, a hint lost (see above).
 */
function made(file: string): boolean {
  try {
    mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
    closeSync(openSync(file, 'a', 0o600));
    return true;
  } catch {
    return false;
  }
}

/** Sets the file's times to now: an attribute change that every watch of it hears, with no data written or synced. */
function touch(file: string): void {
  const now = new Date();
  try {
    utimesSync(file, now, now);
  } catch {
    // The file removed under us: no process can be watching it any longer (see above).
  }
}
