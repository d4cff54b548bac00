// The LMDB environment under SVC_DATA_DIR: the only place that calls lmdb.open. Named databases
// (the outbound spool, message bodies) are opened from the returned root by the modules that own them.
import path from 'node:path';
import { mkdir } from 'node:fs/promises';
import { open, type RootDatabase } from 'lmdb';

export interface LmdbEnv {
  root: RootDatabase;
  close(): Promise<void>;
}

export async function openLmdb(dataDir: string): Promise<LmdbEnv> {
  const dir = path.join(dataDir, 'lmdb');
  await mkdir(dir, { recursive: true });
  // Default flags keep LMDB's durable commits (no noSync/noMetaSync): an acknowledged write is on disk.
  // Several processes may open this environment at once (MTA processes sharing the spool, `svc queue` beside
  // them; docs/decisions.md #58), which LMDB and lmdb-js support with these options: the write lock and the
  // reader table live in lock.mdb with robust mutexes (a process killed mid-transaction has it aborted, not
  // hung), a process joining an environment adopts the flags it was created with (overlappingSync included:
  // each process waits for its own commits' fsync through `flushed`), and lmdb-js clears the reader slots of
  // dead processes on open. No option here keeps a per-process copy of data (lmdb-js's `cache` would go stale
  // beside another writer), and every process opens it through this one function, so with the same flags.
  // The processes must share a pid namespace (LMDB's reader table is keyed by pid; so are spool leases, #58).
  const root = open({ path: dir, maxDbs: 16, compression: false });
  return { root, close: () => root.close() };
}
