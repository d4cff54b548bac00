// Storage foundations: migrations on the embedded database and (when SVC_DATABASE_URL is set for the
// run) on a fresh real Postgres database; the master key and sealed secrets; the LMDB environment.
import t, { type Test } from 'tap';
import { mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import { mock } from 'node:test';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { IDLE_CONNECTION_MS, openEmbedded, openPostgres, type Db } from '../../storage/pg/client.js';
import { listMigrations, migrate } from '../../storage/pg/migrate.js';
import { createSealer, loadMasterKey } from '../../storage/secrets.js';
import { MAP_BYTES, NAMED_DATABASES, openLmdb } from '../../storage/lmdb/env.js';
import { openSpool } from '../../storage/lmdb/spool.js';
import { openLocalBlobStore } from '../../storage/lmdb/blob-store.js';
import { createTestDatabase } from '../helpers/database.js';
import { sweepExpired } from '../../storage/pg/request-guard.js';
import { FROM_SOURCES } from '../helpers/from-sources.js';

const SERVER_URL = process.env.SVC_DATABASE_URL;
const GROW_CHILD = fileURLToPath(new URL('./lmdb-grow-child.ts', import.meta.url));

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-storage-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );
const label = (m: { version: number; name: string }) => `${String(m.version).padStart(4, '0')}_${m.name}`;

async function checkMigrations(t: Test, db: Db) {
  const all = await listMigrations();
  t.ok(all.length > 0, 'there are migrations');
  t.same(
    all.map((m) => m.version),
    [...all.map((m) => m.version)].sort((a, b) => a - b),
    'listed in version order',
  );
  t.equal(new Set(all.map((m) => m.version)).size, all.length, 'no two migrations share a version');

  const applied = await migrate(db);
  t.same(applied, all.map(label), 'a fresh database gets every migration, in order');

  const rows = await db.query<{ version: number; name: string }>(
    'SELECT version, name FROM schema_migrations ORDER BY version',
  );
  t.same(
    rows.map((r) => ({ version: Number(r.version), name: r.name })),
    all.map((m) => ({ version: m.version, name: m.name })),
    'each is recorded in schema_migrations',
  );

  // The foundation's tables exist and answer a query.
  const users = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM users');
  t.same(users, [{ n: 0 }], 'the users table exists');

  t.same(await migrate(db), [], 'a second migrate applies nothing');
  const again = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
  t.equal(again[0]?.n, all.length, 'and records nothing new');
}

t.test('migrations on the embedded database', async (t) => {
  const dir = await tempDir(t);
  const db = await openEmbedded(path.join(dir, 'pg'));
  t.teardown(() => db.close());
  t.equal(db.kind, 'embedded');
  await checkMigrations(t, db);
});

t.test('migrations survive reopening the embedded database', async (t) => {
  const dir = await tempDir(t);
  const first = await openEmbedded(path.join(dir, 'pg'));
  const applied = await migrate(first);
  await first.close();
  t.ok(applied.length > 0);
  const second = await openEmbedded(path.join(dir, 'pg'));
  t.teardown(() => second.close());
  t.same(await migrate(second), [], 'nothing to apply after a reopen');
});

t.test('migrations on a real Postgres', { skip: SERVER_URL ? false : 'needs SVC_DATABASE_URL' }, async (t) => {
  const database = await createTestDatabase(SERVER_URL as string);
  t.teardown(() => database.drop());
  const db = openPostgres(database.url);
  t.teardown(() => db.close());
  t.equal(db.kind, 'postgres');
  await checkMigrations(t, db);
});

t.test(
  'two nodes migrating a real Postgres at once apply each migration once',
  { skip: SERVER_URL ? false : 'needs SVC_DATABASE_URL' },
  async (t) => {
    const database = await createTestDatabase(SERVER_URL as string);
    t.teardown(() => database.drop());
    const a = openPostgres(database.url);
    const b = openPostgres(database.url);
    t.teardown(() => Promise.all([a.close(), b.close()]));
    const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
    const all = (await listMigrations()).map(label);
    t.same([...ra, ...rb].sort(), [...all].sort(), 'between them, every migration exactly once');
    const rows = await a.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
    t.equal(rows[0]?.n, all.length);
  },
);

t.test(
  "a real Postgres connection is kept while idle, past pg-pool's ten seconds",
  { skip: SERVER_URL ? false : 'needs SVC_DATABASE_URL' },
  async (t) => {
    const database = await createTestDatabase(SERVER_URL as string);
    t.teardown(() => database.drop());
    const db = openPostgres(database.url);
    t.teardown(() => db.close());
    const backend = async () => (await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]!.pid;
    // pg-pool times an idle connection with setTimeout: the mocked clock stands for the quiet spell.
    mock.timers.enable({ apis: ['setTimeout'] });
    try {
      const first = await backend();
      mock.timers.tick(60_000);
      t.equal(await backend(), first, 'a minute idle: the same connection answers');
      mock.timers.tick(IDLE_CONNECTION_MS);
      t.not(await backend(), first, 'idle for longer than the limit: a new connection');
    } finally {
      mock.timers.reset();
    }
  },
);

t.test('sealed secrets', async (t) => {
  const sealer = createSealer(randomBytes(32));
  const sealed = sealer.seal('the secret', 'account_tokens:1');
  t.notOk(sealed.includes('the secret'), 'the plaintext does not appear');
  t.equal(sealer.open(sealed, 'account_tokens:1'), 'the secret', 'round trip');
  t.not(sealer.seal('the secret', 'account_tokens:1'), sealed, 'a fresh IV each time');
  t.equal(sealer.open(sealer.seal('', 'x'), 'x'), '', 'the empty string round-trips');
  t.equal(sealer.open(sealer.seal('ünïcødé ✉', 'x'), 'x'), 'ünïcødé ✉', 'unicode round-trips');

  t.throws(() => sealer.open(sealed, 'account_tokens:2'), 'another row (different associated data) does not open it');

  const [version, body] = sealed.split('.');
  const bytes = Buffer.from(body ?? '', 'base64');
  for (const [what, at] of [
    ['ciphertext', bytes.length - 1],
    ['auth tag', 12],
    ['iv', 0],
  ] as const) {
    const tampered = Buffer.from(bytes);
    tampered[at] = (tampered[at] ?? 0) ^ 0x01;
    t.throws(
      () => sealer.open(`${version}.${tampered.toString('base64')}`, 'account_tokens:1'),
      `a tampered ${what} does not open`,
    );
  }
  t.throws(
    () => sealer.open(`${version}.${bytes.subarray(0, 20).toString('base64')}`, 'account_tokens:1'),
    'a truncated value does not open',
  );
  t.throws(() => sealer.open(`v9.${body}`, 'account_tokens:1'), 'an unknown version does not open');

  t.throws(() => createSealer(randomBytes(32)).open(sealed, 'account_tokens:1'), 'another master key does not open it');
  t.throws(() => createSealer(randomBytes(16)), 'a key that is not 32 bytes is refused');
});

t.test('loadMasterKey generates a 0600 key file and reuses it', async (t) => {
  const dataDir = path.join(await tempDir(t), 'not-yet-created');
  const key = await loadMasterKey(null, dataDir);
  t.equal(key.length, 32, '32 bytes');
  const file = path.join(dataDir, 'master.key');
  const st = await stat(file);
  t.equal((st.mode & 0o777).toString(8), '600', 'mode 0600');
  t.equal(
    Buffer.from((await readFile(file, 'utf8')).trim(), 'base64').toString('hex'),
    key.toString('hex'),
    'the file holds the key, base64',
  );
  const again = await loadMasterKey(null, dataDir);
  t.equal(again.toString('hex'), key.toString('hex'), 'the next call returns the same key');
  t.same(await readdir(dataDir), ['master.key'], 'no temporary files left behind');

  // What one sealer sealed, a sealer from the reloaded key opens (a restart keeps secrets readable).
  t.equal(createSealer(again).open(createSealer(key).seal('s', 'a'), 'a'), 's');
});

t.test('concurrent loadMasterKey calls agree on one key', async (t) => {
  const dataDir = await tempDir(t);
  const keys = await Promise.all(Array.from({ length: 5 }, () => loadMasterKey(null, dataDir)));
  const hex = new Set(keys.map((k) => k.toString('hex')));
  t.equal(hex.size, 1, 'all five return the same key');
  const onDisk = Buffer.from((await readFile(path.join(dataDir, 'master.key'), 'utf8')).trim(), 'base64');
  t.equal(onDisk.toString('hex'), keys[0]?.toString('hex'), 'the one on disk');
  t.same(await readdir(dataDir), ['master.key'], 'no temporary files left behind');
});

t.test('a configured master key wins', async (t) => {
  const root = await tempDir(t);
  const configured = randomBytes(32);
  const fresh = path.join(root, 'fresh');
  t.equal(
    (await loadMasterKey(configured, fresh)).toString('hex'),
    configured.toString('hex'),
    'returns the configured key',
  );
  t.notOk(await exists(path.join(fresh, 'master.key')), 'and writes no key file');

  // Even when a generated key file already exists.
  const generated = await loadMasterKey(null, root);
  t.not(generated.toString('hex'), configured.toString('hex'));
  t.equal(
    (await loadMasterKey(configured, root)).toString('hex'),
    configured.toString('hex'),
    'over an existing key file',
  );
});

t.test('a corrupt key file is refused, not replaced', async (t) => {
  const dataDir = await tempDir(t);
  await writeFile(path.join(dataDir, 'master.key'), 'dG9vIHNob3J0\n', { mode: 0o600 });
  await t.rejects(loadMasterKey(null, dataDir), /master\.key/, 'names the file');
  t.equal(await readFile(path.join(dataDir, 'master.key'), 'utf8'), 'dG9vIHNob3J0\n', 'the file is left as it was');
});

t.test('LMDB lives under <dataDir>/lmdb and keeps writes across reopen', async (t) => {
  const dataDir = path.join(await tempDir(t), 'data');
  const env = await openLmdb(dataDir);
  t.ok((await stat(path.join(dataDir, 'lmdb'))).isDirectory(), '<dataDir>/lmdb is created');
  const spool = env.root.openDB({ name: 'spool-test' });
  await env.root.put('greeting', { text: 'hello', n: 1 });
  await spool.put(['2024', 'example.test', 'id-1'], 'queued');
  await env.close();

  const reopened = await openLmdb(dataDir);
  t.teardown(() => reopened.close());
  t.same(reopened.root.get('greeting'), { text: 'hello', n: 1 }, 'a put is readable after close and reopen');
  t.equal(
    reopened.root.openDB({ name: 'spool-test' }).get(['2024', 'example.test', 'id-1']),
    'queued',
    'named databases too',
  );
  t.equal(reopened.root.get('missing'), undefined);
});

t.test('openLmdb creates every named database the roles open: no process creates one beside another', async (t) => {
  // lmdb-js is not safe while another process creates a named database (docs/decisions.md #72): openLmdb creates
  // them all, one process at a time; a module that opened one missing from NAMED_DATABASES would create it outside.
  const env = await openLmdb(path.join(await tempDir(t), 'data'));
  t.teardown(() => env.close());
  const names = () => [...env.root.getKeys()].map(String).sort();
  t.same(names(), [...NAMED_DATABASES].sort(), 'a fresh environment holds every named database, and only those');
  openSpool(env);
  openLocalBlobStore(env);
  t.same(names(), [...NAMED_DATABASES].sort(), 'the spool and the blob store open no other');
});

t.test('another process growing the LMDB file leaves this one its single map, of the fixed size', async (t) => {
  // lmdb-js remaps a smaller map from whichever thread begins a transaction and finds it too small, without a lock;
  // a map fixed at open (MAP_BYTES) never needs it (docs/decisions.md #95). Seen failing with lmdb-js's default:
  // the file mapped twice here after the child's 8 MB.
  const dataDir = path.join(await tempDir(t), 'data');
  const env = await openLmdb(dataDir);
  t.teardown(() => env.close());
  const chunks = env.root.openDB<Buffer, [string, number]>({ name: 'blob_chunks', encoding: 'binary' });
  await chunks.put(['here', 0], Buffer.from('before'));
  const child = spawn(process.execPath, [...FROM_SOURCES, GROW_CHILD, dataDir, '8'], { stdio: 'inherit' });
  const [code] = await once(child, 'exit');
  t.equal(code, 0, 'the other process wrote 8 MB and closed');

  // A read on this thread and a write on lmdb-js's each begin a transaction that sees the other process's pages.
  t.same(chunks.getBinary(['grown', 127]), Buffer.alloc(64 * 1024, 7), "this process reads the other's last value");
  await chunks.put(['here', 1], Buffer.from('after'));
  const file = path.join(dataDir, 'lmdb', 'data.mdb');
  const maps = (await readFile('/proc/self/maps', 'utf8')).split('\n').filter((line) => line.endsWith(` ${file}`));
  t.equal(maps.length, 1, 'the file is mapped once in this process');
  const [start, end] = maps[0]!
    .split(' ')[0]!
    .split('-')
    .map((hex) => BigInt(`0x${hex}`));
  t.equal(Number(end! - start!), MAP_BYTES, 'with the size fixed at open');
  t.equal((env.root.getStats() as { mapSize?: number }).mapSize, MAP_BYTES, 'which is the size LMDB holds');
});

t.test(
  "openLmdb and close wait for another process opening or closing the environment, and take over a dead one's lock",
  async (t) => {
    const dataDir = path.join(await tempDir(t), 'data');
    const lock = path.join(dataDir, 'lmdb', 'open.lock');
    const holdAs = async (pid: number) => {
      await mkdir(lock, { recursive: true });
      await writeFile(path.join(lock, 'pid'), String(pid));
    };

    const gone = spawn(process.execPath, ['-e', '']);
    await once(gone, 'exit');
    await holdAs(gone.pid!);
    const env = await openLmdb(dataDir);
    t.notOk(await exists(lock), "a dead process's lock is taken over, and ours removed after the open");
    await env.close();
    const both = await Promise.all([openLmdb(dataDir), openLmdb(dataDir)]);
    for (const e of both) await e.close();
    t.notOk(await exists(lock), 'two opens at once in one process both end (the second waits), and leave no lock');

    const holder = spawn('sleep', ['60']);
    t.teardown(() => holder.kill());
    await holdAs(holder.pid!);
    let opened = false;
    const opening = openLmdb(dataDir).then((env) => ((opened = true), env));
    await sleep(300);
    t.notOk(opened, 'a live holder is waited for');
    await rm(lock, { recursive: true });
    const second = await opening;
    t.ok(opened, 'and the open goes on once it lets go');

    // A close takes the same lock: the last process to close destroys the environment's mutexes.
    await holdAs(holder.pid!);
    let closed = false;
    const closing = second.close().then(() => (closed = true));
    await sleep(300);
    t.notOk(closed, 'a close waits for a live holder too');
    await rm(lock, { recursive: true });
    await closing;
    t.notOk(await exists(lock), 'and then closes, and lets go');
  },
);

t.test('the nonce sweep keeps what a node on time would still take (issue 15 item 6)', async (t) => {
  const dir = await tempDir(t);
  const db = await openEmbedded(path.join(dir, 'pg'));
  t.teardown(() => db.close());
  await migrate(db);
  const [{ now: dbNow }] = (await db.query<{ now: Date }>('SELECT now() AS now')) as [{ now: Date }];
  const ago = (min: number) => new Date(dbNow.getTime() - min * 60_000);
  for (const [nonce, expires] of [
    ['closed 3 min ago', ago(3)],
    ['closed 7 min ago', ago(7)],
  ] as const)
    await db.query('INSERT INTO request_nonces (key_id, nonce, expires_at) VALUES ($1, $2, $3)', ['k', nonce, expires]);
  // A node whose clock runs ten minutes ahead of the database's sweeps.
  await sweepExpired(db, new Date(dbNow.getTime() + 10 * 60_000), 3_600_000);
  const left = (await db.query<{ nonce: string }>('SELECT nonce FROM request_nonces ORDER BY nonce')).map(
    (r) => r.nonce,
  );
  t.same(left, ['closed 3 min ago'], 'only the nonce past the window and five more minutes on both clocks goes');
});
