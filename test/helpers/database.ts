// Where a test service keeps its Postgres data. Embedded: a copy of a migrated PGlite template
// (creating a PGlite cluster costs seconds, copying one a fraction). Real Postgres
// (SVC_DATABASE_URL set for the test run): a fresh database per service, dropped at the end.
import { createHash, randomBytes } from 'node:crypto';
import { appendFile, mkdir, mkdtemp, rename, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import type { Test } from 'tap';
import { openEmbedded, openPostgres, type Db } from '../../storage/pg/client.js';
import { listMigrations, migrate } from '../../storage/pg/migrate.js';
import { copyTree, removeTree } from './tree.js';

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

// Postgres sizes its shared memory from shared_buffers, and PGlite clears all of it when it opens: with the
// default 128 MB that was a third of the 1.3 s of CPU an embedded test service took to open here (page faults
// included), and in a profile of the control tests the clearing and its page faults were a tenth of all CPU. A
// test service holds a few megabytes of data. Production keeps PGlite's default.
const TEMPLATE_CONF = 'shared_buffers = 16MB\n';

/**
 * What names a migrated template: the migrations (numbers and names too: a renumbered one is recorded under its
 * new number) and anything else the template is made with.
 */
async function migrationsHash(extra = ''): Promise<string> {
  const hash = createHash('sha256');
  for (const m of await listMigrations()) hash.update(`${m.version} ${m.name}\n${m.sql}`);
  hash.update(extra);
  return hash.digest('hex').slice(0, 12);
}

async function templateDir(): Promise<string> {
  // The exact pin in package.json names the PGlite build the template was made with.
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8'));
  const version = pkg.dependencies['@electric-sql/pglite'] as string;
  const dir = path.join(os.tmpdir(), `svc-pglite-template-${version}-${await migrationsHash(TEMPLATE_CONF)}`);
  if (await exists(dir)) return dir;
  const tmp = `${dir}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const db = await openEmbedded(tmp);
  await migrate(db);
  await db.close();
  await appendFile(path.join(tmp, 'postgresql.conf'), TEMPLATE_CONF);
  // Test files run in parallel: the first to finish wins, the others discard their copy.
  await rename(tmp, dir).catch(() => removeTree(tmp));
  return dir;
}

export async function prepareEmbedded(dataDir: string): Promise<void> {
  await mkdir(dataDir, { recursive: true });
  await copyTree(await templateDir(), path.join(dataDir, 'pg'));
}

export interface TestDatabase {
  url: string;
  drop(): Promise<void>;
}

const databaseUrl = (serverUrl: string, name: string) => {
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return url.toString();
};

/**
 * A database on the server already migrated, to copy test databases from (CREATE DATABASE … TEMPLATE) rather than
 * run every migration's statements, one at a time, for each test service. Named by the migrations' hash, as the
 * PGlite template is; built under a name of its own and renamed when done, so that a test file running beside
 * this one never copies a half-migrated one.
 */
const templates = new Map<string, Promise<string>>();
async function serverTemplate(serverUrl: string): Promise<string> {
  const name = `svc_template_${await migrationsHash()}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  try {
    const found = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (found.rowCount) return name;
    const building = `${name}_${process.pid}_${randomBytes(4).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${building}`);
    const db = openPostgres(databaseUrl(serverUrl, building));
    try {
      await migrate(db);
    } finally {
      await db.close();
    }
    // Another test file may have finished first: its template is the same, and this one goes.
    await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`).catch(async (err: { code?: string }) => {
      await admin.query(`DROP DATABASE ${building}`);
      if (err.code !== '42P04') throw err; // duplicate_database
    });
    return name;
  } finally {
    await admin.end();
  }
}

/**
 * A fresh database on the server at `serverUrl`. `migrated`: a copy of one where every migration is applied
 * (the test services' case); otherwise empty, for tests of `svc migrate` and of a first start.
 */
export async function createTestDatabase(serverUrl: string, opts: { migrated?: boolean } = {}): Promise<TestDatabase> {
  const name = `svc_t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  let template: string | null = null;
  if (opts.migrated) {
    const made = templates.get(serverUrl) ?? serverTemplate(serverUrl);
    templates.set(serverUrl, made);
    template = await made;
  }
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}${template ? ` TEMPLATE ${template}` : ''}`);
  await admin.end();
  return {
    url: databaseUrl(serverUrl, name),
    async drop() {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * A migrated database for a storage test, closed and removed when `t` ends: on the server of SVC_DATABASE_URL a copy
 * of its migrated template, with a pool of `connections`; else a PGlite copy of the migrated template (one connection).
 */
export async function openTestDb(t: Test, connections = 10): Promise<Db> {
  const server = process.env.SVC_DATABASE_URL;
  if (server) {
    const database = await createTestDatabase(server, { migrated: true });
    const db = openPostgres(database.url, connections);
    t.teardown(async () => {
      await db.close();
      await database.drop();
    });
    return db;
  }
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-test-db-'));
  await prepareEmbedded(dir);
  const db = await openEmbedded(path.join(dir, 'pg'));
  t.teardown(async () => {
    await db.close();
    await rm(dir, { recursive: true, force: true });
  });
  return db;
}
