// Opens real Storage handles for the mail-store and blob-store tests: the embedded database (a copy of
// the migrated template) by default, or a fresh database on the Postgres of SVC_DATABASE_URL; LMDB in a
// temporary directory. A second handle can be opened on the same Postgres database (another "host").
import type { Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pino from 'pino';
import { loadConfig } from '../../config/load.js';
import { openStorage, type Storage } from '../../storage/index.js';
import type { Queryable } from '../../storage/pg/client.js';
import { createTestDatabase, prepareEmbedded } from '../helpers/database.js';

export const SERVER_URL = process.env.SVC_DATABASE_URL;

export interface MailTestStorage {
  storage: Storage;
  dataDir: string;
  /** The database URL when on a real Postgres; null on the embedded one. */
  databaseUrl: string | null;
  /** Opens another handle (its own data dir and LMDB) on the same Postgres database. */
  openPeer(blobStore?: 'local' | 'postgres'): Promise<Storage>;
}

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-mailstore-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function open(t: Test, dataDir: string, blobStore: string, databaseUrl: string | null): Promise<Storage> {
  const config = loadConfig({
    SVC_DATA_DIR: dataDir,
    SVC_BLOB_STORE: blobStore,
    SVC_LOG_LEVEL: 'silent',
    ...(databaseUrl ? { SVC_DATABASE_URL: databaseUrl } : {}),
  });
  const storage = await openStorage(config, pino({ level: 'silent' }));
  let closed = false;
  const close = storage.close;
  storage.close = async () => {
    if (closed) return;
    closed = true;
    await close();
  };
  t.teardown(() => storage.close());
  return storage;
}

export async function openMailTestStorage(
  t: Test,
  blobStore: 'local' | 'postgres' = 'local',
): Promise<MailTestStorage> {
  const dataDir = await tempDir(t);
  let databaseUrl: string | null = null;
  if (SERVER_URL) {
    const database = await createTestDatabase(SERVER_URL);
    // DROP … WITH (FORCE) ends any connection a handle still holds, whatever the teardown order.
    t.teardown(() => database.drop());
    databaseUrl = database.url;
  } else await prepareEmbedded(dataDir);
  const storage = await open(t, dataDir, blobStore, databaseUrl);
  return {
    storage,
    dataDir,
    databaseUrl,
    async openPeer(peerBlobStore = blobStore) {
      if (!databaseUrl) throw new Error('a peer handle needs a real Postgres (SVC_DATABASE_URL)');
      return open(t, await tempDir(t), peerBlobStore, databaseUrl);
    },
  };
}

/** An organization, project, verified apex claim and inbound capability for `domain`; returns the capability id. */
export async function insertInboundCapability(q: Queryable, domain: string): Promise<string> {
  const now = new Date();
  const [org, project, claim, cap] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
  await q.query('INSERT INTO organizations (id, name, created_at, updated_at) VALUES ($1, $2, $3, $3)', [
    org,
    'Org',
    now,
  ]);
  await q.query(
    'INSERT INTO projects (id, organization_id, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)',
    [project, org, 'Project', now],
  );
  await q.query(
    `INSERT INTO domain_claims (id, project_id, domain, verify_token, status, verified_at, created_at)
     VALUES ($1, $2, $3, 'token', 'verified', $4, $4)`,
    [claim, project, domain, now],
  );
  await q.query(
    `INSERT INTO inbound_capabilities (id, claim_id, project_id, domain, status, verified_at, created_at)
     VALUES ($1, $2, $3, $4, 'verified', $5, $5)`,
    [cap, claim, project, domain, now],
  );
  return cap;
}
