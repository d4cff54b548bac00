// Child for storage.test.ts: another process that grows the LMDB environment's file while the test's process has
// it open, as a control process grows the spool that an MTA process reads. It writes <megabytes> of 64 KiB values
// in one transaction, under keys ['grown', i] of blob_chunks, and closes.
//
// Usage: node --import ./bin/resolve-sources.ts test/storage/lmdb-grow-child.ts <dataDir> <megabytes>
import { openLmdb } from '../../storage/lmdb/env.js';

const [dataDir, megabytes] = process.argv.slice(2);
if (!dataDir || !megabytes) throw new Error('usage: lmdb-grow-child.ts <dataDir> <megabytes>');
const env = await openLmdb(dataDir);
const chunks = env.root.openDB<Buffer, [string, number]>({ name: 'blob_chunks', encoding: 'binary' });
const value = Buffer.alloc(64 * 1024, 7);
await chunks.transaction(() => {
  for (let i = 0; i < Number(megabytes) * 16; i++) void chunks.put(['grown', i], value);
});
await env.close();
