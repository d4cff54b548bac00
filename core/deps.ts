// What an operation runs over: the context (config, clock, resolver, log) and the storage handle. The
// control plane's Deps extend it, so a handler passes its own; the IMAP server and `svc` build one.
import type { Context } from '../config/context.js';
import type { Storage } from '../storage/index.js';

export interface CoreDeps {
  ctx: Context;
  storage: Storage;
}
