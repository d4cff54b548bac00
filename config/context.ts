// The Context built once at start (bin/start.ts) and passed down; nothing reads configuration or
// the time from a global, so tests can hand in their own clock.
import pino, { type Logger } from 'pino';
import type { Config } from './schema.js';
import type { Resolver } from '../mail/resolver.js';
import type { Clock } from '../mail/clock.js';

// The clock lives on the ground floor (mail/ uses it); re-exported here for the code that builds a Context.
export { systemClock, type Clock } from '../mail/clock.js';

export interface Context {
  config: Readonly<Config>;
  clock: Clock;
  log: Logger;
  /** Every DNS lookup goes through this one resolver (SVC_DNS_SERVERS). */
  resolver: Resolver;
}

export function createLogger(level: Config['logLevel']): Logger {
  return pino({
    level,
    base: { service: 'svc-mail' },
    // Secrets never reach the log, whatever a caller passes in.
    redact: ['req.headers.authorization', 'req.headers["x-svc-admin-key"]', '*.secret', '*.password'],
  });
}
