// Where a test service keeps its Postgres data. Embedded: a copy of a migrated PGlite template
// (creating a PGlite cluster costs seconds, copying one a fraction). Real Postgres
// (SVC_DATABASE_URL set for the test run): a fresh database per service, dropped at the end.
import { createHash, randomBytes } from 'node:crypto';
import { mkdir, rename, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { readFile } from 'node:fs/promises';
import pg from 'pg';
import { openEmbedded } from '../../storage/pg/client.js';
import { listMigrations, migrate } from '../../storage/pg/migrate.js';
import { copyTree, removeTree } from './tree.js';

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

async function templateDir(): Promise<string> {
  // The exact pin in package.json names the PGlite build the template was made with.
  const pkg = JSON.parse(await readFile(new URL('../../package.json', import.meta.url), 'utf8'));
  const version = pkg.dependencies['@electric-sql/pglite'] as string;
  const hash = createHash('sha256');
  // Numbers and names too: a renumbered migration is recorded under its new number.
  for (const m of await listMigrations()) hash.update(`${m.version} ${m.name}\n${m.sql}`);
  const dir = path.join(os.tmpdir(), `svc-pglite-template-${version}-${hash.digest('hex').slice(0, 12)}`);
  if (await exists(dir)) return dir;
  const tmp = `${dir}.${process.pid}.${randomBytes(4).toString('hex')}`;
  const db = await openEmbedded(tmp);
  await migrate(db);
  await db.close();
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

export async function createTestDatabase(serverUrl: string): Promise<TestDatabase> {
  const name = `svc_t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      const c = new pg.Client({ connectionString: serverUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}
