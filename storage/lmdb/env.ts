// The LMDB environment under SVC_DATA_DIR: the only place that calls lmdb.open. Named databases
// (the outbound spool, message bodies) are opened from the returned root by the modules that own them.
import path from 'node:path';
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { open, type RootDatabase } from 'lmdb';

export interface LmdbEnv {
  root: RootDatabase;
  close(): Promise<void>;
}

/**
 * Every named database of the environment (spool.ts, blob-store.ts), each created, where missing, by openLmdb.
 * A new one is added here as well as where it is opened.
 */
export const NAMED_DATABASES = ['queue', 'index', 'bodies', 'leases', 'held', 'blob_meta', 'blob_chunks'] as const;

/**
 * The size of the environment's memory map, fixed at open: address space only (the map is read-only and shared, so
 * it takes no memory until read, and the file grows with its data, not with the map). lmdb-js otherwise starts at
 * 128 KiB and remaps as the file grows, from whichever thread begins a transaction and finds it too small: unlocked,
 * so a read on the main thread and a write on lmdb-js's writing thread could remap at once when another process had
 * grown the file, and leave a stale map on the list that the close unmaps with the wrong size (docs/decisions.md #95).
 * An environment past this size still grows as before.
 */
export const MAP_BYTES = 2 ** 40;

export async function openLmdb(dataDir: string): Promise<LmdbEnv> {
  const dir = path.join(dataDir, 'lmdb');
  await mkdir(dir, { recursive: true });
  // One process at a time opens the environment and creates what is missing of it, or closes it (docs/decisions.md
  // #72): lmdb-js is not safe while another process creates a named database or the environment itself (seen: a
  // segfault or a failed open in ~1 of 100 pairs of processes starting together on a fresh directory).
  const lock = path.join(dir, 'open.lock');
  const root = await whileHolding(lock, () => {
    // Default flags keep LMDB's durable commits (no noSync/noMetaSync): an acknowledged write is on disk.
    // Several processes may open this environment at once (MTA processes sharing the spool, `svc queue` beside
    // them; docs/decisions.md #58), which LMDB and lmdb-js support with these options: the write lock and the
    // reader table live in lock.mdb with robust mutexes (a process killed mid-transaction has it aborted, not
    // hung), a process joining an environment adopts the flags it was created with (overlappingSync included:
    // each process waits for its own commits' fsync through `flushed`), and lmdb-js clears the reader slots of
    // dead processes on open. No option here keeps a per-process copy of data (lmdb-js's `cache` would go
    // stale beside another writer), and every process opens it through this one function, so with the same
    // flags. The processes must share a pid namespace (LMDB's reader table is keyed by pid; so are spool
    // leases, #58).
    const env = open({ path: dir, maxDbs: 16, compression: false, mapSize: MAP_BYTES });
    for (const name of NAMED_DATABASES) env.openDB({ name });
    return env;
  });
  // Closes hold it too: the last process to close an environment destroys its mutexes in lock.mdb (LMDB's
  // mdb_env_close0), and one opening at that moment can take them as alive and fail its first write (#72).
  return { root, close: () => whileHolding(lock, () => root.close()) };
}

/** How long an open or a close waits for another's, and after how long a lock that names no process is stale. */
const LOCK_WAIT_MS = 30_000;
const LOCK_UNNAMED_MS = 10_000;

/**
 * Runs `fn` while this process holds the lock `lock`, a directory (mkdir is atomic) holding the holder's pid. A
 * lock whose process is gone is taken over: it died while opening or closing. The processes share a pid namespace
 * (above), so a pid that answers is alive. Not covered: two processes both waiting for the lock of one that died
 * in its few milliseconds of holding it may both take it over, and then open together as they would without it.
 */
async function whileHolding<T>(lock: string, fn: () => T | Promise<T>): Promise<T> {
  const pidFile = path.join(lock, 'pid');
  for (const since = Date.now(); ; await sleep(5)) {
    try {
      await mkdir(lock);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const holder = Number(await readFile(pidFile, 'utf8').catch(() => ''));
    const made = await stat(lock).then(
      (s) => s.mtimeMs,
      () => null,
    );
    // Our own pid is alive: another open in this process holds it, and is waited for like any other.
    const stale = holder > 0 ? !alive(holder) : made !== null && Date.now() - made > LOCK_UNNAMED_MS;
    if (stale) await rm(lock, { recursive: true, force: true });
    else if (Date.now() - since > LOCK_WAIT_MS)
      throw new Error(`${lock} has been held for 30 s (pid ${holder || 'not yet written'})`);
  }
  try {
    await writeFile(pidFile, String(process.pid));
    return await fn();
  } finally {
    await rm(lock, { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
