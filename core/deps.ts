// What an operation runs over: the context (config, clock, resolver, log) and the storage handle. The
// control plane's Deps extend it, so a handler passes its own; the IMAP server and `svc` build one.
import type { Context } from '../config/context.js';
import type { Storage } from '../storage/index.js';

/**
 * The shared writes a request waits for (docs/operations.md, Metrics): the request guard's statement, the spool's
 * synced write of a message's body, and the statement that accepts messages. Each is a group commit, so a wait
 * holds the batch ahead of it as well as its own.
 */
export const WAIT_STEPS = ['guard', 'spool', 'accept'] as const;
export type WaitStep = (typeof WAIT_STEPS)[number];

export interface CoreDeps {
  ctx: Context;
  storage: Storage;
  /** Told how long each wait took (seconds); the service counts them in svc_request_wait_seconds. */
  waited?: (step: WaitStep, seconds: number) => void;
}

/** Runs `write` and tells `deps.waited` how long the request waited for it, when it listens. */
export async function timedWait<T>(deps: CoreDeps, step: WaitStep, write: () => Promise<T>): Promise<T> {
  if (!deps.waited) return write();
  const start = performance.now();
  try {
    return await write();
  } finally {
    deps.waited(step, (performance.now() - start) / 1000);
  }
}
