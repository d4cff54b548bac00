// The processes of this machine, from /proc (Linux): for benchmarks that count a service's CPU and memory and
// tests that find the workers of a `svc start` cluster primary.
import { readFileSync, readdirSync } from 'node:fs';

export interface Proc {
  pid: number;
  ppid: number;
  pgrp: number;
  cmdline: string;
  /** CPU time (user + system) so far, in seconds. */
  cpu: number;
  /** CPU time of its children that exited and were reaped, in seconds. */
  reapedCpu: number;
}

/** Every process now running, from /proc (Linux). */
export function processes(): Proc[] {
  const out: Proc[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      // Fields after "pid (comm) ": state ppid pgrp … utime(14) stime(15) cutime(16) cstime(17), in 1/100 s.
      const f = stat
        .slice(stat.lastIndexOf(')') + 2)
        .split(' ')
        .map(Number);
      out.push({
        pid: Number(name),
        ppid: f[1]!,
        pgrp: f[2]!,
        cmdline: readFileSync(`/proc/${name}/cmdline`, 'latin1'),
        cpu: (f[11]! + f[12]!) / 100,
        reapedCpu: (f[13]! + f[14]!) / 100,
      });
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/**
 * The children of `parent` that run the service (`bin/svc.ts`, or `dist/bin/svc.js` as the benchmarks and the
 * systemd units run it): a cluster primary's workers.
 */
export const svcChildren = (parent: number): number[] =>
  processes()
    .filter((p) => p.ppid === parent && /bin\/svc\.[jt]s(\0|$)/.test(p.cmdline))
    .map((p) => p.pid);
