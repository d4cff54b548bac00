// Small helpers shared by the bench modules.
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { openLmdb } from '../storage/lmdb/env.js';
import { openSpool } from '../storage/lmdb/spool.js';

export { freePort } from '../test/helpers/postfix.js';
import { processes, type Proc } from '../test/helpers/processes.js';

export { processes, svcChildren, type Proc } from '../test/helpers/processes.js';

/** uid/gid of a system user, from /etc/passwd (Node has no getpwnam). */
export function user(name: string): { uid: number; gid: number } {
  const f = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`))
    ?.split(':');
  if (!f || f.length < 4) throw new Error(`no "${name}" user in /etc/passwd`);
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

export const nobody = () => user('nobody');

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The value at quantile q (0..1) of an ascending array. */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** The median of `xs`: its middle value, the mean of the middle two for an even count; NaN for none. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** The median and the range of `xs`, as the benches report a figure over their runs. */
export function medianRange(xs: readonly number[]): { median: number; min: number; max: number } {
  return { median: median(xs), min: Math.min(...xs), max: Math.max(...xs) };
}

/** A figure as the reports print it: `d` decimals, or '—' when there is none (undefined, NaN, infinite). */
export function fixed(n: number | undefined, d = 0): string {
  return n === undefined || !Number.isFinite(n) ? '—' : n.toFixed(d);
}

/** A median and range as the reports print them: "median (min–max)", `d` decimals each, `unit` after the median. */
export function span(s: { median: number; min: number; max: number }, d = 0, unit = ''): string {
  return `${fixed(s.median, d)}${unit} (${fixed(s.min, d)}–${fixed(s.max, d)})`;
}

/** Resolves once 127.0.0.1:port accepts a connection; `dead` returns a reason to give up early. */
export async function waitPort(port: number, timeoutMs: number, dead: () => string | null = () => null): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const why = dead();
    if (why) throw new Error(why);
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`nothing listens on 127.0.0.1:${port} after ${timeoutMs} ms`);
    await sleep(25);
  }
}

/** Whether a process is a Postgres backend serving database `dbName`: its title reads "postgres: <user> <db> …". */
export const isBackendOf =
  (dbName: string) =>
  (p: { cmdline: string }): boolean =>
    p.cmdline.startsWith('postgres: ') && p.cmdline.includes(` ${dbName} `);

/** CPU seconds used so far by the processes `match` picks. */
export const cpuSecondsOf = (match: (p: Proc) => boolean) =>
  processes()
    .filter(match)
    .reduce((sum, p) => sum + p.cpu, 0);

/**
 * The CPU seconds that the processes `match` picks have used since this call, process by process: one that starts
 * later counts from its start, and one that ends in between takes its time with it (counted as none). Two sums taken
 * apart (cpuSecondsOf) lose the whole time of one that ends, so that a Postgres backend pg-pool closed during a run
 * made that run's Postgres CPU read -0.43 ms a message.
 */
export const cpuSecondsSince = (match: (p: Proc) => boolean): (() => number) => sinceCall(match, (p) => p.cpu);

/**
 * The seconds that the main threads of the processes `match` picks have spent runnable but waiting for a core since
 * this call, process by process as cpuSecondsSince counts: where a busy host's latency goes that no process's CPU
 * time shows (docs/decisions.md #83). A Postgres backend has one thread; a Node process's main thread runs its
 * event loop. NaN where the kernel keeps no such account (without CONFIG_SCHED_INFO).
 */
export const coreWaitSecondsSince = (match: (p: Proc) => boolean): (() => number) =>
  coreWaitSeconds(process.pid) === null ? () => NaN : sinceCall(match, (p) => coreWaitSeconds(p.pid) ?? NaN);

/**
 * /proc/<pid>/schedstat, the main thread's: its time on a core, its time runnable and waiting for one (both in
 * nanoseconds) and its count of turns on a core. The wait, in seconds; null when the process is gone or the file
 * is not there.
 */
export function coreWaitSeconds(pid: number): number | null {
  try {
    const wait = Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]);
    return Number.isFinite(wait) ? wait / 1e9 : null;
  } catch {
    return null;
  }
}

/** A counter of each process `match` picks, summed over them, since this call (cpuSecondsSince's rule); NaN: none. */
function sinceCall(match: (p: Proc) => boolean, read: (p: Proc) => number): () => number {
  const start = new Map(
    processes()
      .filter(match)
      .map((p) => [p.pid, read(p)]),
  );
  return () =>
    processes()
      .filter(match)
      .reduce((sum, p) => {
        // NaN: gone between the listing and the read, counted as none.
        const now = read(p);
        return Number.isNaN(now) ? sum : sum + now - (start.get(p.pid) ?? 0);
      }, 0);
}

/**
 * The CPU time so far of the cores this process may run on (its affinity, as `taskset` sets it), in seconds, from
 * /proc/stat's lines of those cores: `busy` is user, nice, system, irq and softirq time (guest time is already in
 * user), `all` that and idle and iowait; time stolen by the hypervisor is in neither. Between two readings, busy over
 * all is how much of the cores a phase kept busy: a side near 100% is bound by the cores, one below it by something
 * else (a wait, a lock, the disk), which its own CPU a message does not tell. Not os.cpus()'s times: libuv leaves
 * softirq out of them, where the kernel counts much of loopback networking's work.
 */
export function machineCpu(): { busy: number; all: number } {
  const cores = allowedCores();
  let busy = 0;
  let all = 0;
  for (const line of readFileSync('/proc/stat', 'latin1').split('\n')) {
    // "cpuN user nice system idle iowait irq softirq steal guest guest_nice", in 1/100 s.
    const m = /^cpu(\d+) (.*)$/.exec(line);
    if (!m || !cores.has(Number(m[1]))) continue;
    const [user, nice, system, idle, iowait, irq, softirq] = m[2]!.split(' ').map(Number);
    const b = user! + nice! + system! + irq! + softirq!;
    busy += b;
    all += b + idle! + iowait!;
  }
  return { busy: busy / 100, all: all / 100 };
}

/** The cores of this process's affinity, from /proc/self/status's Cpus_allowed_list ("0-1", "0,2-3"). */
function allowedCores(): Set<number> {
  const list = /^Cpus_allowed_list:\s*(\S+)$/m.exec(readFileSync('/proc/self/status', 'latin1'))?.[1] ?? '';
  const cores = new Set<number>();
  for (const range of list.split(',')) {
    const [from, to = from] = range.split('-').map(Number);
    for (let c = from!; c <= to!; c++) cores.add(c);
  }
  return cores;
}

/** What a phase cost the machine, from two machineCpu readings: the share of the cores kept busy, and per item. */
export function machineShare(
  before: { busy: number; all: number },
  after: { busy: number; all: number },
  items: number,
): { machineBusy: number; machineCpuMsPerMessage: number } {
  const busy = after.busy - before.busy;
  return { machineBusy: busy / (after.all - before.all), machineCpuMsPerMessage: (busy * 1000) / items };
}

/**
 * How long the disk under `dir` went without finishing a request while it had some in flight, sampled from
 * /proc/diskstats every 10 ms until the returned function is called: the stalls of the host's storage, which hold
 * up every durable commit in flight (Postgres's and the spool's) whatever the code above them does. Passive: it adds
 * no I/O of its own. Null where the directory's device is not listed there (tmpfs, overlay, not Linux).
 */
export function watchDisk(dir: string): (() => { device: string; longestMs: number; over50: number }) | null {
  // Linux's dev_t as glibc encodes it (major(3), minor(3)).
  const dev = statSync(dir).dev;
  const major = ((dev >> 8) & 0xfff) | (Math.floor(dev / 2 ** 32) & ~0xfff);
  const minor = (dev & 0xff) | ((dev >> 12) & ~0xff);
  const read = () => {
    let stats: string;
    try {
      stats = readFileSync('/proc/diskstats', 'latin1');
    } catch {
      return null;
    }
    for (const line of stats.split('\n')) {
      // "major minor name reads … writes … in-flight …" (the kernel's Documentation/admin-guide/iostats.rst).
      const f = line.trim().split(/\s+/);
      if (Number(f[0]) !== major || Number(f[1]) !== minor) continue;
      // Finished requests: reads and writes, and discards and flushes where the kernel counts them.
      const done = Number(f[3]) + Number(f[7]) + Number(f[14] ?? 0) + Number(f[18] ?? 0);
      return { device: f[2]!, done, inFlight: Number(f[11]) };
    }
    return null;
  };
  const first = read();
  if (!first) return null;
  const stalls = diskStalls();
  stalls.sample(performance.now(), first.done, first.inFlight);
  const timer = setInterval(() => {
    const s = read();
    if (s) stalls.sample(performance.now(), s.done, s.inFlight);
  }, 10);
  return () => {
    clearInterval(timer);
    const all = stalls.end(performance.now());
    return { device: first.device, longestMs: Math.max(0, ...all), over50: all.filter((ms) => ms > 50).length };
  };
}

/**
 * watchDisk's rule over its samples (the time, the requests finished so far, those in flight): a stall runs from
 * the last sample where the disk was seen to finish something or to be idle, through the samples where it had
 * requests in flight and finished none, to the next that finds one finished or none in flight. `end` gives each
 * stall's length, one still running counted to `now`.
 */
export function diskStalls(): {
  sample(now: number, done: number, inFlight: number): void;
  end(now: number): number[];
} {
  const stalls: number[] = [];
  let last: { now: number; done: number } | null = null;
  let since: number | null = null;
  return {
    sample(now, done, inFlight) {
      if (last && done === last.done && inFlight > 0) since ??= last.now;
      else if (since !== null) {
        stalls.push(now - since);
        since = null;
      }
      last = { now, done };
    },
    end(now) {
      return since === null ? stalls : [...stalls, now - since];
    },
  };
}

/** A WAL segment's name in pg_wal (timeline, log, segment: 24 hex digits), or one being made (`xlogtemp.<pid>`). */
const WAL_SEGMENT = /^(?:[0-9A-F]{24}|xlogtemp\.\d+)$/;

/**
 * How many WAL segments Postgres created in `walDir` (its pg_wal) while watched, until the returned function is called.
 * Postgres takes the next segment from those its checkpoints recycled (an old one renamed), as many as it expects to
 * need; past them it creates one: 16 MB of zeros written and synced as `xlogtemp.<pid>`, then renamed, with its WAL
 * write lock held, so that every commit in flight waits for it (docs/decisions.md #83). A created segment is told from
 * a recycled one by its inode and birth time, which no file of pg_wal had before (a rename keeps both; a file made on
 * an inode freed by a removed segment has a new birth time). Every file once seen is kept, not only the sample
 * before's: a file one listing missed is not counted again when the next one has it. The directory is read every 10 ms,
 * and a new name stat'ed: inotify would wake the bench for each of Postgres's WAL writes. Null where pg_wal cannot be
 * read (a server on another machine, another user's files).
 */
export function watchWal(walDir: string | null): (() => number) | null {
  if (!walDir) return null;
  // Each file's identity (inode and birth time) by its name at the last sample, and every identity ever seen.
  let names = new Map<string, string>();
  const seen = new Set<string>();
  const read = () => {
    const next = new Map<string, string>();
    for (const name of readdirSync(walDir)) {
      if (!WAL_SEGMENT.test(name)) continue;
      // A segment keeps its name; an xlogtemp name comes back for each segment its backend makes, so it is stat'ed.
      let id = name.startsWith('xlogtemp.') ? undefined : names.get(name);
      if (id === undefined) {
        try {
          const st = statSync(path.join(walDir, name));
          id = `${st.ino}:${st.birthtimeMs}`;
        } catch {
          continue; // renamed or removed since the listing: the next sample sees it where it went
        }
      }
      next.set(name, id);
    }
    return next;
  };
  try {
    names = read();
  } catch {
    return null;
  }
  for (const id of names.values()) seen.add(id);
  let created = 0;
  const sample = () => {
    try {
      names = read();
    } catch {
      return;
    }
    for (const id of names.values())
      if (!seen.has(id)) {
        seen.add(id);
        created++;
      }
  };
  const timer = setInterval(sample, 10);
  return () => {
    clearInterval(timer);
    sample();
    return created;
  };
}

/**
 * Starts watching what a measurement's durable commits wait on: the disk under `dataDir` (watchDisk) and the WAL
 * segments Postgres creates in `walDir` (watchWal). The function returned ends both: the disk's stalls and the
 * segments created, each null where it is not watched.
 */
export function watchStorage(
  dataDir: string,
  walDir: string | null,
): () => { disk: ReturnType<NonNullable<ReturnType<typeof watchDisk>>> | null; walSegmentsCreated: number | null } {
  const [disk, wal] = [watchDisk(dataDir), watchWal(walDir)];
  return () => ({ disk: disk?.() ?? null, walSegmentsCreated: wal?.() ?? null });
}

/** The pg_wal directory of the PostgreSQL server at `serverUrl` (read as its superuser), or null if not readable. */
export async function walDirectory(serverUrl: string): Promise<string | null> {
  try {
    const dir = path.join(await dataDirectoryOf(serverUrl), 'pg_wal');
    readdirSync(dir);
    return dir;
  } catch {
    return null;
  }
}

/** The data directory of the PostgreSQL server at `serverUrl`, as the server names it (read as its superuser). */
async function dataDirectoryOf(serverUrl: string): Promise<string> {
  const c = new pg.Client({ connectionString: serverUrl });
  try {
    await c.connect();
    return (await c.query<{ d: string }>("SELECT current_setting('data_directory') AS d")).rows[0]!.d;
  } finally {
    await c.end().catch(() => {});
  }
}

/** The PostgreSQL server the benches make their databases on (--pg), unless BENCH_PG_URL names another. */
export const PG_URL = process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/**
 * A database of the bench's own on the server at `serverUrl`, dropped by the cleanup it pushes:
 * its name, its URL and the server's version.
 */
export async function benchDatabase(
  serverUrl: string,
  prefix: string,
  cleanups: (() => Promise<unknown>)[],
): Promise<{ dbName: string; url: string; version: string }> {
  const dbName = `${prefix}_${Date.now().toString(36)}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  cleanups.push(async () => {
    const c = new pg.Client({ connectionString: serverUrl });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await c.end();
  });
  const version = (await admin.query<{ v: string }>("SELECT current_setting('server_version') AS v")).rows[0]!.v;
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${dbName}`;
  return { dbName, url: url.toString(), version };
}

/** The CPU list a process may run on (`taskset -pc`), as taskset takes it back: "0", "0,1", "0-3". */
function affinityOf(pid: number): string {
  const out = execFileSync('taskset', ['-pc', String(pid)], { encoding: 'utf8' });
  const list = /:\s*(\S+)\s*$/.exec(out)?.[1];
  if (!list) throw new Error(`taskset -pc ${pid}: ${out}`);
  return list;
}

/**
 * Under taskset (`taskset -c 0 npm run bench`): the PostgreSQL server at `serverUrl` pinned to this process's cores
 * for the run, every one of its processes, and put back by the cleanup it pushes. Else a one-core run of ours has a
 * second core for its database, which Postfix has no use for. The postmaster's new backends inherit its mask.
 * Returns the cores, or null when the bench may use every core or the server is not on this machine (its
 * postmaster.pid unreadable).
 */
export async function pinPostgres(serverUrl: string, cleanups: (() => Promise<unknown>)[]): Promise<string | null> {
  if (os.availableParallelism() >= os.cpus().length) return null;
  const dataDir = await dataDirectoryOf(serverUrl);
  let postmaster: number;
  try {
    postmaster = Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
  } catch {
    return null;
  }
  const cores = affinityOf(process.pid);
  const children = execFileSync('pgrep', ['-P', String(postmaster)], { encoding: 'utf8' })
    .split('\n')
    .filter(Boolean);
  const saved = [postmaster, ...children.map(Number)].map((pid) => ({ pid, cores: affinityOf(pid) }));
  cleanups.push(async () => {
    // A backend that has exited since is gone with its mask.
    for (const p of saved) {
      try {
        execFileSync('taskset', ['-a', '-pc', p.cores, String(p.pid)], { stdio: 'ignore' });
      } catch {}
    }
  });
  for (const p of saved) execFileSync('taskset', ['-a', '-pc', cores, String(p.pid)], { stdio: 'ignore' });
  return cores;
}

/**
 * Empties the tables every send writes (messages, and with them their events and recipients), so that each
 * measurement of phase 3 (sendEmail alone, pgbench at each client count) starts from the same database: without
 * it each one met the rows of every one before it (a pgbench sweep inserts ~160k), and the later ones paid for
 * bigger indexes. No ANALYZE after: in a run with one, Postgres's CPU a request was ~0.5 ms against ~0.3 without
 * (plans made for empty tables that the run outgrew, most likely); a table never analyzed is taken for ten pages.
 */
export const freshSends = (url: string): Promise<void> => statement(url, 'TRUNCATE messages CASCADE');

/**
 * ANALYZE of the bench database, after the end-to-end warm-up: what autovacuum would have done by then (a table is
 * analyzed once 50 rows and a tenth of it have changed, looked at every minute), which this machine's Postgres runs
 * without (autovacuum = off). An ANALYZE also makes every connection plan its statements again: without one, the
 * MTA's outcome statement kept the plan made for the first few rows, a scan of all of messages per batch
 * (docs/decisions.md #82).
 */
export const analyzeSends = (url: string): Promise<void> => statement(url, 'ANALYZE');

/** One statement on a connection of its own. */
async function statement(url: string, sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/**
 * Removes every message from the spool under `dataDir`, returning how many: for phase 3 of bench/run.ts, where the
 * control runs alone and nothing delivers, so that each load's messages do not stay behind it (at 100 kB its loads
 * spooled ~10 GB in all). LMDB reuses the freed pages for the next load's messages, so the spool's file grows no
 * more than one load's worth. Run beside the control between two loads: the environment is made to be shared by
 * processes, and this opens it as `svc queue` does (storage/lmdb/env.ts).
 */
export async function emptySpool(dataDir: string): Promise<number> {
  const env = await openLmdb(dataDir);
  try {
    const spool = openSpool(env);
    // The ids first: the iteration holds a read snapshot, to be finished before writing.
    const ids = Array.from(spool.entries(), (e) => e.id);
    for (let i = 0; i < ids.length; i += EMPTY_SLICE) await spool.removeMany(ids.slice(i, i + EMPTY_SLICE));
    return ids.length;
  } finally {
    await env.close();
  }
}
/** emptySpool removes this many entries in each write transaction. */
const EMPTY_SLICE = 1_000;

/**
 * Why messages missed the sink: the bench database's messages by status, the events of the first few not
 * delivered and, given the service's data directory, where its spool has them, so a shortfall says what the MTA
 * met rather than only that it fell short.
 */
export async function undelivered(url: string, dataDir?: string): Promise<string> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const statuses = await c.query<{ status: string; n: string }>(
      `SELECT status, count(*) AS n FROM messages GROUP BY 1 ORDER BY 2 DESC`,
    );
    const events = await c.query<{ id: string; type: string; detail: unknown; at: Date; updated: Date }>(
      `SELECT m.id, e.type, e.detail, e.created_at AS at, m.updated_at AS updated
         FROM (SELECT id, updated_at FROM messages WHERE status <> 'delivered' ORDER BY created_at LIMIT 3) m
         JOIN message_events e ON e.message_id = m.id ORDER BY m.id, e.seq`,
    );
    return [
      `  messages by status: ${statuses.rows.map((r) => `${r.status} ${r.n}`).join(', ')}`,
      ...events.rows.map(
        (r) =>
          `  ${r.id} ${r.at.toISOString()} ${r.type} ${JSON.stringify(r.detail)} (updated ${r.updated.toISOString()})`,
      ),
      ...(dataDir ? await spooled(dataDir, [...new Set(events.rows.map((r) => r.id))]) : []),
    ].join('\n');
  } finally {
    await c.end();
  }
}

/**
 * Where the spool has those messages: due when (a lease parks an entry 10 minutes ahead, so a time that far
 * ahead is a delivery in progress), tried how often, and whether its body is there; or not spooled at all.
 */
async function spooled(dataDir: string, ids: string[]): Promise<string[]> {
  const env = await openLmdb(dataDir);
  try {
    const spool = openSpool(env);
    return ids.map((id) => {
      const e = spool.get(id);
      if (!e) return `  ${id} not in the spool`;
      const due = ((e.nextAttemptMs - Date.now()) / 1000).toFixed(1);
      return `  ${id} spooled: due in ${due} s, ${e.attempts} attempts, body ${spool.body(id) ? 'present' : 'missing'}`;
    });
  } finally {
    await env.close();
  }
}
