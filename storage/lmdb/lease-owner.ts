// Who holds a spool lease, and whether that process is still alive (docs/decisions.md #58). Several MTA
// processes share one spool; a process starting takes back only the leases of processes that are gone.
//
// The owner is named by what the kernel already keeps for every process, so no heartbeat is written and a
// kill -9 is seen at once: its pid, its start time (field 22 of /proc/<pid>/stat, clock ticks since boot,
// which makes a reused pid a different owner), the boot id (a reboot ends every owner) and the pid namespace
// (a pid means something only inside its own namespace). The check is a read of /proc/<pid>/stat.
//
// Processes sharing a spool share a pid namespace: LMDB requires it anyway, since its reader table in lock.mdb
// is keyed by pid (two processes of different namespaces with the same pid clash there). So an owner of another
// pid namespace is a process of an earlier run of the container (a restart gives the new process a namespace of
// its own), and gone.
import { readFileSync, readlinkSync } from 'node:fs';

export interface LeaseOwner {
  pid: number;
  /** starttime of /proc/<pid>/stat; '' where there is no /proc. */
  start: string;
  /** /proc/sys/kernel/random/boot_id; '' where there is none. */
  boot: string;
  /** The inode of /proc/self/ns/pid; '' where there is none. */
  pidns: string;
}

/** Whether the process that took a lease is still alive. Must be synchronous: it runs inside a write transaction. */
export type OwnerLiveness = (owner: LeaseOwner) => boolean;

function read(file: string): string {
  try {
    return readFileSync(file, 'latin1').trim();
  } catch {
    return '';
  }
}

/** Fields 3 (state) and 22 (starttime) of /proc/<pid>/stat, or null when there is no such process. */
function procStat(pid: number | 'self'): { state: string; start: string } | null {
  const s = read(`/proc/${pid}/stat`);
  if (!s) return null;
  // Field 2 (comm) is in parentheses and may itself hold spaces and parentheses: count from the last ')'.
  const rest = s.slice(s.lastIndexOf(')') + 2).split(' ');
  return { state: rest[0] ?? '', start: rest[19] ?? '' };
}

function pidNamespace(): string {
  try {
    return /\d+/.exec(readlinkSync('/proc/self/ns/pid'))?.[0] ?? '';
  } catch {
    return '';
  }
}

let self: LeaseOwner | undefined;

/** This process as a lease owner (computed once). */
export function currentOwner(): LeaseOwner {
  self ??= {
    pid: process.pid,
    start: procStat('self')?.start ?? '',
    boot: read('/proc/sys/kernel/random/boot_id'),
    pidns: pidNamespace(),
  };
  return self;
}

export function sameOwner(a: LeaseOwner, b: LeaseOwner): boolean {
  return a.pid === b.pid && a.start === b.start && a.boot === b.boot && a.pidns === b.pidns;
}

/** The owner as stored with a lease: one short string (no colon occurs in any part). */
export function ownerTag(o: LeaseOwner): string {
  return `${o.pid}:${o.start}:${o.boot}:${o.pidns}`;
}

export function parseOwnerTag(tag: string): LeaseOwner | null {
  const [pid, start, boot, pidns, extra] = tag.split(':');
  if (pid === undefined || start === undefined || boot === undefined || pidns === undefined || extra !== undefined)
    return null;
  const n = Number(pid);
  return Number.isInteger(n) && n > 0 ? { pid: n, start, boot, pidns } : null;
}

/**
 * The kernel's answer, seen from `me`: an owner of another boot or another pid namespace (an earlier run of the
 * container) is gone; otherwise it is alive while /proc/<pid> exists, is not a zombie (killed, not yet reaped)
 * and started when the owner did.
 */
export function processAlive(me: LeaseOwner = currentOwner()): OwnerLiveness {
  return (o) => {
    if (sameOwner(o, me)) return true;
    if (o.boot && me.boot && o.boot !== me.boot) return false;
    if (o.pidns !== me.pidns) return false;
    const st = procStat(o.pid);
    if (st) return st.state !== 'Z' && st.state !== 'X' && st.start === o.start;
    if (me.start) return false; // there is a /proc, and no such pid in it
    // No /proc (not Linux): signal 0 tells whether the pid exists; a reused pid is taken for the owner.
    try {
      process.kill(o.pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  };
}
