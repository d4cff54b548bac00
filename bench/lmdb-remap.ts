// lmdb-js's remap race, outside the service (docs/decisions.md #95): a diagnostic, not a benchmark. Each round makes a
// fresh environment and runs two processes on it. The reader opens it first and, until the grower is done, reads on its
// main thread without pause and writes through lmdb-js's writing thread every millisecond, as an MTA reads and leases;
// the grower, as a control's sends, writes --megabytes in transactions of 1 MB, so that the reader's transactions keep
// finding the file past its map. Then the reader closes the environment and ends. With lmdb-js's default map (--map
// default) the reader remaps from several threads at once, and in some rounds ends with SIGSEGV; with the map the
// service opens (--map fixed, storage/lmdb/env.ts's MAP_BYTES) it never remaps. Prints how each reader ended. For a
// later lmdb-js: `--map default` ending every reader with 0 would say it no longer races.
//
//   npm run bench:remap -- [--rounds 20] [--megabytes 128] [--map default|fixed]
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, writeFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setImmediate as tick, setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { open, type RootDatabase } from 'lmdb';
import { MAP_BYTES } from '../storage/lmdb/env.js';

const { values: args, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    rounds: { type: 'string', default: '20' },
    megabytes: { type: 'string', default: '128' },
    map: { type: 'string', default: 'default' },
  },
});

/** The environment as each side opens it: lmdb-js's defaults but for the map's size. */
function openEnv(dir: string, map: string): RootDatabase {
  return open({ path: dir, maxDbs: 4, compression: false, ...(map === 'fixed' ? { mapSize: MAP_BYTES } : {}) });
}

async function reader(dir: string, map: string): Promise<void> {
  const env = openEnv(dir, map);
  const db = env.openDB<Buffer, string>({ name: 'd', encoding: 'binary' });
  await db.put('seed', Buffer.alloc(16));
  process.stdout.write('ready\n');
  let stop = false;
  const writing = (async () => {
    for (let i = 0; !stop; i++) {
      await db.put(`w${i % 64}`, Buffer.alloc(64));
      await sleep(1);
    }
  })();
  while (!existsSync(path.join(dir, 'done'))) {
    for (let i = 0; i < 50; i++) db.getBinary('seed');
    await tick();
  }
  stop = true;
  await writing;
  await env.close();
}

async function grower(dir: string, map: string, megabytes: number): Promise<void> {
  const env = openEnv(dir, map);
  const db = env.openDB<Buffer, string>({ name: 'd', encoding: 'binary' });
  const value = Buffer.alloc(256 * 1024, 1);
  for (let i = 0; i < megabytes; i++)
    db.transactionSync(() => {
      for (let k = 0; k < 4; k++) db.putSync(`g${i}-${k}`, value);
    });
  await env.close();
  writeFileSync(path.join(dir, 'done'), '');
}

const [role, dir] = positionals;
if (role === 'reader') await reader(dir!, args.map!);
else if (role === 'grower') await grower(dir!, args.map!, Number(args.megabytes));
else {
  const self = fileURLToPath(import.meta.url);
  const side = (name: string, d: string) =>
    spawn(process.execPath, [...process.execArgv, self, name, d, '--map', args.map!, '--megabytes', args.megabytes!], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
  const ends = new Map<string, number>();
  for (let round = 1; round <= Number(args.rounds); round++) {
    const d = await mkdtemp(path.join(os.tmpdir(), 'svc-lmdb-remap-'));
    const r = side('reader', d);
    // Listened for at once: the reader may end while the grower is still being waited for.
    const readerEnd = once(r, 'exit') as Promise<[number | null, string | null]>;
    const [first] = (await once(r.stdout!, 'data')) as [Buffer];
    if (!first.toString().startsWith('ready')) throw new Error(`the reader said ${first.toString()}`);
    const g = side('grower', d);
    const [gCode] = (await once(g, 'exit')) as [number | null];
    if (gCode !== 0) {
      r.kill('SIGKILL');
      throw new Error(`the grower ended with ${gCode}`);
    }
    const [code, signal] = await readerEnd;
    const end = signal ?? String(code);
    ends.set(end, (ends.get(end) ?? 0) + 1);
    console.log(`round ${round}: the reader ended with ${end}`);
    await rm(d, { recursive: true, force: true });
  }
  console.log(`--map ${args.map}: ${[...ends].map(([end, n]) => `${n} ended with ${end}`).join(', ')}`);
}
