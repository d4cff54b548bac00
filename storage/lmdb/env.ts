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
  const root = open({ path: dir, maxDbs: 16, compression: false });
  return { root, close: () => root.close() };
}
