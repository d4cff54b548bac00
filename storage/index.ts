// Opens Postgres (real or embedded) and LMDB together; the Storage handle every role receives.
import path from 'node:path';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { openEmbedded, openPostgres, type Db } from './pg/client.js';
import { migrate } from './pg/migrate.js';
import { openLmdb, type LmdbEnv } from './lmdb/env.js';
import { createSealer, loadMasterKey, type Sealer } from './secrets.js';
import { openSpool, type Spool } from './lmdb/spool.js';
import { openMailParts, type MailParts } from './mail.js';
import { createCaches, type Caches } from './caches.js';
import { wakeSignal, type WakeSignal } from './wake-signal.js';

export interface Storage {
  db: Db;
  lmdb: LmdbEnv;
  /** The outbound spool (queue and bodies) on LMDB. */
  spool: Spool;
  sealer: Sealer;
  /** Inbox mail: `blobs` (bodies, per SVC_BLOB_STORE), `mail` (the mailbox backend), `changes` (the feed). */
  mail: MailParts;
  /** In-process caches and statement batchers of this handle (storage/caches.ts). */
  caches: Caches;
  /**
   * Webhook attempts were written, due now: the writers of events say so after their commit, and the webhook
   * dispatcher of this process, or where it has none those of the other processes on this data directory, looks at
   * once instead of at its next poll (docs/decisions.md #88).
   */
  webhooksDue: WakeSignal;
  close(): Promise<void>;
}

/** Under SVC_DATA_DIR: the files through which one process's wakes reach the others on the host (wake-signal.ts). */
const WAKE_DIR = 'wake';

export async function openDb(config: Readonly<Config>, log: Logger): Promise<Db> {
  if (config.databaseUrl) return openPostgres(config.databaseUrl);
  // docs/decisions.md #15: say so at every start.
  log.warn(
    'embedded database (PGlite) in use: it survives a process crash but not a power loss; ' +
      'for evaluation, tests and single-user setups only. Set SVC_DATABASE_URL in production.',
  );
  return openEmbedded(path.join(config.dataDir, 'pg'));
}

export async function openStorage(config: Readonly<Config>, log: Logger): Promise<Storage> {
  const sealer = createSealer(await loadMasterKey(config.masterKey, config.dataDir));
  const db = await openDb(config, log);
  try {
    const applied = await migrate(db);
    if (applied.length) log.info({ applied }, 'migrations applied');
    const lmdb = await openLmdb(config.dataDir);
    const mail = openMailParts(config, db, lmdb, log);
    return {
      db,
      lmdb,
      sealer,
      spool: openSpool(lmdb, { wakeFile: path.join(config.dataDir, WAKE_DIR, 'spool') }),
      mail,
      caches: createCaches(db),
      webhooksDue: wakeSignal(path.join(config.dataDir, WAKE_DIR, 'webhooks')),
      async close() {
        await mail.close();
        await lmdb.close();
        await db.close();
      },
    };
  } catch (err) {
    await db.close().catch(() => {});
    throw err;
  }
}
