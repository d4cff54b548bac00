// What a storage handle keeps in process, for as long as it is open: caches of values cheap to find again
// (each re-checked where it is used), and the batchers that let concurrent requests share a statement.
// One set per handle: tests run several services in one process, each over its own database.
import type { Networks } from '../mail/client-address.js';
import { boundedCache, type BoundedCache } from './bounded-cache.js';
import type { Db } from './pg/client.js';
import type { StoredCredential } from './pg/credentials.js';
import { acceptBatch, idempotentBatch, type AcceptBatch, type SendingCapability } from './pg/messages.js';
import type { GuardBatches } from './pg/request-guard.js';
import { templateReads, type TemplateReads } from './pg/templates.js';

export interface Caches {
  /** Credentials by key id: the request guard's statement reads each again (control/middleware/authenticate.ts). */
  credentials: BoundedCache<StoredCredential>;
  /** Key ids that matched no credential, with the time until which they are answered 401 without a lookup. */
  unknownKeys: BoundedCache<number>;
  /** Opened credential secrets, keyed by the immutable sealed value: opening one costs an AES-GCM decryption. */
  openedSecrets: BoundedCache<string>;
  /** allowedCidrs lists (docs/api.md §4.7), parsed, keyed by the list joined with commas. */
  cidrLists: BoundedCache<Networks>;
  /** Verified sending capabilities by domain: the accept statement checks each still stands (core/send.ts). */
  senders: BoundedCache<SendingCapability>;
  /** Concurrent sends without an idempotency key share a statement (storage/pg/messages.ts). */
  accept: AcceptBatch;
  /** Concurrent sends with an idempotency key share a statement (storage/pg/messages.ts). */
  acceptKeyed: AcceptBatch;
  /** Concurrent sends' reads of the templates they name share a statement (storage/pg/templates.ts). */
  templates: TemplateReads;
  /** Concurrent signed requests share the nonce and rate-limit statement (storage/pg/request-guard.ts). */
  guard: GuardBatches;
}

export function createCaches(db: Db): Caches {
  return {
    credentials: boundedCache(),
    unknownKeys: boundedCache(),
    openedSecrets: boundedCache(),
    cidrLists: boundedCache(),
    senders: boundedCache(),
    accept: acceptBatch(db),
    acceptKeyed: idempotentBatch(db),
    templates: templateReads(db),
    guard: new Map(),
  };
}
