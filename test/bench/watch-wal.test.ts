// bench/util.ts's watchWal and walDirectory, behind the bench's "N WAL segments created": a segment Postgres creates
// is counted once, whether seen as xlogtemp.<pid> or only under its name; one its checkpoint recycles (a rename), one
// a sample's listing missed, and the other files of pg_wal are not counted.
import { mkdir, mkdtemp, rename, rm, unlink, writeFile } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import t from 'tap';
import { freePort } from '../helpers/postfix.js';
import { sleep, walDirectory, watchWal } from '../../bench/util.js';

const seg = (n: number) => `00000001000000000000${n.toString(16).toUpperCase().padStart(4, '0')}`;

t.test('watchWal counts the segments created, not those recycled, removed or not segments', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-watch-wal-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(path.join(dir, 'archive_status'));
  for (const n of [1, 2, 3]) await writeFile(path.join(dir, seg(n)), 'old');
  await writeFile(path.join(dir, '00000001.history'), '');
  const stop = watchWal(dir)!;
  t.ok(stop, 'a readable directory is watched');

  // A checkpoint recycles the oldest segment under a future name, with no sample in between and with one.
  await rename(path.join(dir, seg(1)), path.join(dir, seg(8)));
  await sleep(30);
  await rename(path.join(dir, seg(2)), path.join(dir, seg(9)));
  // Created and seen while it is being written, then renamed to its name: one.
  await writeFile(path.join(dir, 'xlogtemp.4242'), 'zeros');
  await sleep(30);
  await rename(path.join(dir, 'xlogtemp.4242'), path.join(dir, seg(4)));
  await sleep(30);
  // Created and renamed between two samples: one.
  await writeFile(path.join(dir, 'xlogtemp.4243'), 'zeros');
  await rename(path.join(dir, 'xlogtemp.4243'), path.join(dir, seg(5)));
  await sleep(30);
  // The same backend's next one under the same temporary name, its first renamed meanwhile: two.
  await writeFile(path.join(dir, 'xlogtemp.4243'), 'zeros');
  await sleep(30);
  await rename(path.join(dir, 'xlogtemp.4243'), path.join(dir, seg(10)));
  await writeFile(path.join(dir, 'xlogtemp.4243'), 'zeros');
  await sleep(30);
  // Created under its name: one. Not segments: none.
  await writeFile(path.join(dir, seg(6)), 'zeros');
  await writeFile(path.join(dir, `${seg(3)}.00000028.backup`), '');
  await writeFile(path.join(dir, 'archive_status', `${seg(3)}.ready`), '');
  await sleep(30);
  // Missing from a sample's listing (here under a name that is not a segment's), then back under a segment's: it was
  // seen before, so nothing.
  await rename(path.join(dir, seg(9)), path.join(dir, 'away'));
  await sleep(30);
  await rename(path.join(dir, 'away'), path.join(dir, seg(11)));
  await sleep(30);
  // Removed by a checkpoint: nothing.
  await unlink(path.join(dir, seg(3)));
  t.equal(stop(), 5);
});

t.test('watchWal and walDirectory: null where pg_wal cannot be read', async (t) => {
  t.equal(watchWal(null), null);
  t.equal(watchWal(path.join(os.tmpdir(), 'svc-no-such-pg-wal')), null);
  t.equal(await walDirectory(`postgres://postgres@127.0.0.1:${await freePort()}/postgres`), null, 'no server');
});

const url = process.env.SVC_DATABASE_URL;
t.test(
  "walDirectory: the server's pg_wal, holding the segment it writes",
  { skip: url ? false : 'SVC_DATABASE_URL is not set (the Postgres pass sets it)' },
  async (t) => {
    const dir = await walDirectory(url!);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    t.teardown(() => c.end());
    const { rows } = await c.query<{ name: string }>('SELECT pg_walfile_name(pg_current_wal_lsn()) AS name');
    if (dir === null) {
      // A server this process cannot read (another machine, another user's files): its files are not ours to see.
      t.pass('pg_wal is not readable here');
      return;
    }
    t.equal(path.basename(dir), 'pg_wal');
    t.ok(readdirSync(dir).includes(rows[0]!.name), `${dir} holds ${rows[0]!.name}`);
  },
);
