// Starts the real service in-process on 127.0.0.1:0 with a temporary data directory, the platform
// key set and a controllable clock; stops and cleans up in the test's teardown.
import { mkdtemp, readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { loadConfig } from '../../config/load.js';
import { startService, type RunningService, type StartOptions } from '../../bin/start.js';
import type { WorkerOptions } from '../../mta/outbound/worker.js';
import type { WebhookDispatcherOptions } from '../../mta/webhooks/dispatcher.js';
import { createClient, type Client, type Credential } from '@svc-mail/sdk';
import { testClock, type TestClock } from './clock.js';
import { createTestDatabase, prepareEmbedded, type TestDatabase } from './database.js';
import { removeTree } from './tree.js';

import { ADMIN_KEY } from './child.js';

export { ADMIN_KEY };

export interface TestService {
  url: string;
  /** The IMAP server's bound port (it runs with the `all` role). */
  imapPort: number;
  clock: TestClock;
  dataDir: string;
  running: RunningService;
  /** The real Postgres database in use, or null on the embedded one. */
  databaseUrl: string | null;
  /** Stops and starts again on the same data directory and database (ports change). */
  restart(): Promise<void>;
  stop(): Promise<void>;
  client(credential?: Credential): Client;
  admin(): Client;
  signup(email?: string, password?: string): Promise<SignedUp>;
}

export interface SignedUp {
  client: Client;
  email: string;
  password: string;
  userId: string;
  tokenId: string;
  secret: string;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

export const uniqueEmail = (tag = 'user') => `${tag}-${randomBytes(6).toString('hex')}@example.test`;

export interface TestServiceOptions {
  env?: Record<string, string>;
  clock?: TestClock;
  /** A logger of the test's own, to read what the service logs. */
  log?: Logger;
  /** Run as a second node of this service: same Postgres database and master key, own data dir. */
  nodeOf?: TestService;
  /**
   * Run the MTA (delivery worker and notification sender) in the service. Off by default so that
   * control-plane tests see accepted messages stay `queued`; delivery tests turn it on.
   */
  mta?: boolean | WorkerOptions;
  /** Options of the webhook dispatcher, which runs with the MTA. */
  webhooks?: WebhookDispatcherOptions;
  /** IMAP server limits (connection caps, login failure delay); tests default to a 50 ms delay. */
  imap?: StartOptions['imap'];
}

/**
 * What another process of a test service shares with it, as the systemd units of one deployment share their env file:
 * its Postgres database and its master key (which it wrote under its data directory). A real Postgres only: the
 * embedded database lives inside one process.
 */
export async function sharedWith(s: TestService): Promise<{ SVC_DATABASE_URL: string; SVC_MASTER_KEY: string }> {
  if (!s.databaseUrl) throw new Error('another process of a service needs a real Postgres (SVC_DATABASE_URL)');
  const masterKey = (await readFile(path.join(s.dataDir, 'master.key'), 'utf8')).trim();
  return { SVC_DATABASE_URL: s.databaseUrl, SVC_MASTER_KEY: masterKey };
}

export async function startTestService(t: Teardown, opts: TestServiceOptions = {}): Promise<TestService> {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'svc-test-'));
  const clock = opts.clock ?? testClock();
  const serverUrl = process.env.SVC_DATABASE_URL;
  let database: TestDatabase | null = null;
  let shared: Record<string, string> = {};
  if (opts.nodeOf) {
    shared = await sharedWith(opts.nodeOf);
  } else if (serverUrl) database = await createTestDatabase(serverUrl, { migrated: true });
  else await prepareEmbedded(dataDir);

  const config = loadConfig({
    SVC_DATA_DIR: dataDir,
    SVC_HTTP_PORT: '0',
    SVC_SMTP_PORT: '0',
    SVC_IMAP_PORT: '0',
    SVC_HOSTNAME: 'mta.test',
    SVC_PLATFORM_ADMIN_KEY: ADMIN_KEY,
    SVC_LOG_LEVEL: process.env.SVC_TEST_LOG_LEVEL ?? 'silent',
    // Every sink of the suite is on loopback, which the MTA refuses otherwise; test/mta/transport-security
    // turns it off to prove the refusal.
    SVC_ALLOW_PRIVATE_MX: '1',
    ...(database ? { SVC_DATABASE_URL: database.url } : {}),
    ...shared,
    ...opts.env,
  });
  const boot = () =>
    startService(config, {
      clock,
      checkResponses: true,
      log: opts.log,
      mta: opts.mta ?? false,
      webhooks: opts.webhooks,
      imap: { loginFailureDelayMs: 50, ...opts.imap },
      // scrypt at N=2^10 instead of 2^15: ~6 ms a hash instead of ~200 ms here; the suite hashes thousands.
      passwordLogN: 10,
    });
  let running = await boot();
  let stopped = false;

  const svc: TestService = {
    get url() {
      return `http://127.0.0.1:${running.ports.http}`;
    },
    get imapPort() {
      return running.ports.imap ?? 0;
    },
    clock,
    dataDir,
    databaseUrl: database?.url ?? shared.SVC_DATABASE_URL ?? null,
    get running() {
      return running;
    },
    async restart() {
      await running.stop();
      running = await boot();
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      await running.stop();
      await database?.drop();
      await removeTree(dataDir);
    },
    ...clientsFor(() => svc.url, clock.now),
  };
  t.teardown(() => svc.stop());
  return svc;
}

/** SDK clients of a service at `baseUrl()` (read on every call: the port changes on restart). */
export function clientsFor(
  baseUrl: () => string,
  now: () => number = Date.now,
  adminKey = ADMIN_KEY,
): Pick<TestService, 'client' | 'admin' | 'signup'> {
  const client = (credential?: Credential) => createClient({ baseUrl: baseUrl(), credential, now });
  return {
    client,
    admin: () => client({ adminKey }),
    async signup(email = uniqueEmail(), password = 'correct horse battery') {
      const res = await client().auth.signup({ email, password });
      const { tokenId, secret } = res.accountToken;
      return { client: client({ keyId: tokenId, secret }), email, password, userId: res.user.id, tokenId, secret };
    },
  };
}
