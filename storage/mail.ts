// The inbox-mail parts of the Storage handle: the blob store chosen by SVC_BLOB_STORE, the change feed
// and the mailbox backend over both. Closed before the database and LMDB they use.
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { systemClock, type Clock } from '../config/context.js';
import type { BlobStore } from '../mail/blob-store.js';
import type { MailStore } from '../mail/mail-store.js';
import type { Db } from './pg/client.js';
import type { LmdbEnv } from './lmdb/env.js';
import { openLocalBlobStore } from './lmdb/blob-store.js';
import { openPgBlobStore } from './pg/blob-store.js';
import { openChangeFeed, type ChangeFeedWriter } from './pg/change-feed.js';
import { openMailStore } from './pg/mail-store.js';

export interface MailParts {
  blobs: BlobStore;
  store: MailStore;
  /** The feed, writer side too: storage/pg/inboxes.ts publishes inbox notices, storage/pg/imap-mailboxes.ts
   * mailbox changes (mail/mail-store.ts). */
  changes: ChangeFeedWriter;
  close(): Promise<void>;
}

export function openBlobStore(kind: Config['blobStore'], db: Db, lmdb: LmdbEnv): BlobStore {
  return kind === 'postgres' ? openPgBlobStore(db) : openLocalBlobStore(lmdb);
}

export function openMailParts(
  config: Readonly<Pick<Config, 'blobStore'>>,
  db: Db,
  lmdb: LmdbEnv,
  log: Logger,
  clock: Clock = systemClock,
): MailParts {
  const onError = (err: unknown) => log.warn({ err }, 'mail store: after-commit step failed');
  const blobs = openBlobStore(config.blobStore, db, lmdb);
  const feed = openChangeFeed(db, { onError });
  const store = openMailStore({ db, blobs, feed, clock, onError });
  return {
    blobs,
    store,
    changes: feed,
    async close() {
      await feed.close();
      await blobs.close();
    },
  };
}
