// A short memory of MX addresses that did not answer (docs/operations.md, "Connections"): an address that
// refused the TCP connection, was unreachable or timed out before its greeting is skipped for a while, so a
// dead host costs one timeout rather than one per message, and the next MX host of each domain (RFC 5321 §5.1)
// is tried at once. Postfix keeps the same kind of "dead host" memory per next hop.
import type { Clock } from '../../mail/clock.js';

/** The socket errors (nodemailer keeps the system code in originalCode) that say nothing listens there. */
const UNREACHABLE = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN']);
/** Timeouts before the greeting; a socket timeout later in a session is the session's trouble. */
const EARLY_TIMEOUTS = new Set(['CONNECT_TIMEOUT', 'GREETING_TIMEOUT']);

interface ConnectFailure {
  code?: string;
  originalCode?: string;
  timeoutType?: string;
  responseCode?: number;
}

/**
 * Whether a failed connection attempt means the address is not there: nothing listening, no route, or no
 * greeting in time. A reply (even a 421 greeting) or a TLS failure is not: that host answers, and
 * another domain's delivery may well go through it.
 */
export function isDeadHost(err: ConnectFailure): boolean {
  if (err.responseCode) return false;
  if (err.code === 'ETIMEDOUT') return EARLY_TIMEOUTS.has(err.timeoutType ?? '');
  return UNREACHABLE.has(err.originalCode ?? err.code ?? '');
}

export interface HostFailures {
  /** Why the address is skipped now, or null when it may be dialled. */
  get(source: string | null, address: string): string | null;
  set(source: string | null, address: string, why: string): void;
  /** The address answered: forget its failure at once. */
  clear(source: string | null, address: string): void;
}

/**
 * Keyed by (source address, remote address): a firewall may block one of our addresses and not another, and
 * one IP of a host may be down while its others answer. `ttlMs` 0 turns the memory off.
 */
export function createHostFailures(clock: Clock, ttlMs: number): HostFailures {
  const failed = new Map<string, { until: number; why: string }>();
  const key = (source: string | null, address: string) => `${source ?? ''}|${address}`;
  return {
    get(source, address) {
      const k = key(source, address);
      const f = failed.get(k);
      if (!f) return null;
      if (clock.now() >= f.until) {
        failed.delete(k);
        return null;
      }
      return f.why;
    },
    set(source, address, why) {
      if (ttlMs <= 0) return;
      // Stale entries go when read; a sweep on each write keeps a long-lived map from holding dead ones.
      if (failed.size > 1000) for (const [k, f] of failed) if (clock.now() >= f.until) failed.delete(k);
      failed.set(key(source, address), { until: clock.now() + ttlMs, why });
    },
    clear(source, address) {
      failed.delete(key(source, address));
    },
  };
}
