// The real `svc` command as operators run it: `node --import ./bin/resolve-sources.ts bin/svc.ts <command>` in a child
// process, with its own data directory and exactly the SVC_* variables it is given. When the test run
// has SVC_DATABASE_URL, children that touch the database get a fresh database on that server.
import type { Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { mkdtemp } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import os from 'node:os';
import path from 'node:path';
import { waitFor } from './wait-for.js';
import { removeTree } from './tree.js';
import { createTestDatabase, prepareEmbedded } from './database.js';
import { FROM_SOURCES } from './from-sources.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const SERVER_URL = process.env.SVC_DATABASE_URL;

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export interface Svc {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** stdout lines that are JSON (pino log lines). */
  logs(): Record<string, unknown>[];
  exited: Promise<Exit>;
  /** Set once the child has exited. */
  exit: Exit | null;
}

/** The environment of the test run without any SVC_* variable: each child gets exactly what it is given. */
export function baseEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('SVC_')) env[k] = v;
  return env;
}

/**
 * `node --import ./bin/resolve-sources.ts bin/svc.ts <args>` from the project's root, with exactly the SVC_* variables
 * in `env`.
 */
function spawnSvc(args: string[], env: Record<string, string>) {
  return spawn(process.execPath, [...FROM_SOURCES, 'bin/svc.ts', ...args], {
    cwd: ROOT,
    env: { ...baseEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function svc(t: Test, args: string[], env: Record<string, string>): Svc {
  return watched(t, spawnSvc(args, env), 'svc');
}

/**
 * A spawned child (stdout and stderr piped) as an Svc: its output kept, its exit recorded, and killed at the test's
 * end if still running. `name` says which child in the teardown's error.
 */
export function watched(t: Test, child: ChildProcess, name: string): Svc {
  let out = '';
  let err = '';
  child.stdout?.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (err += d));
  const s: Svc = {
    child,
    stdout: () => out,
    stderr: () => err,
    logs: () =>
      out.split('\n').flatMap((line) => {
        if (!line.startsWith('{')) return [];
        try {
          return [JSON.parse(line) as Record<string, unknown>];
        } catch {
          return [];
        }
      }),
    exit: null,
    exited: new Promise<Exit>((resolve) => {
      child.on('exit', (code, signal) => {
        s.exit = { code, signal };
        resolve(s.exit);
      });
    }),
  };
  t.teardown(async () => {
    if (s.exit === null) {
      child.kill('SIGKILL');
      // A process ends on SIGKILL unless it is stuck in the kernel (an uninterruptible wait): bounded all the same,
      // so that such a child fails the test with its output instead of holding the file until tap's timeout.
      await exitWithin(s, `teardown: ${name} after SIGKILL`, 30_000);
    }
  });
  return s;
}

export async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-cli-'));
  t.teardown(() => removeTree(dir));
  return dir;
}

/**
 * The database of an `svc` child: against a real Postgres (the run's SVC_DATABASE_URL) a fresh database of its own,
 * else nothing to set (the child opens the embedded one under its SVC_DATA_DIR). Given `migratedIn` (the child's
 * SVC_DATA_DIR), the database is migrated already: on Postgres a copy of the migrated template; embedded, the migrated
 * PGlite template copied there, where the child would otherwise create a cluster (PGlite's initdb, in WebAssembly:
 * ~6 s of CPU on a 2-core PVM host, the copy a fraction). Without it, the child creates and migrates its database,
 * what the tests of doing so need.
 */
export async function databaseEnv(t: Test, migratedIn?: string): Promise<Record<string, string>> {
  if (!SERVER_URL) {
    if (migratedIn !== undefined) await prepareEmbedded(migratedIn);
    return {};
  }
  const db = await createTestDatabase(SERVER_URL, { migrated: migratedIn !== undefined });
  // Teardowns run in reverse order: the child is killed before its database is dropped.
  t.teardown(() => db.drop());
  return { SVC_DATABASE_URL: db.url };
}

/** The platform admin key every test service is started with (SVC_PLATFORM_ADMIN_KEY). */
export const ADMIN_KEY = 'test-platform-admin-key-0123456789';

export const listenEnv = (dataDir: string) => ({
  SVC_DATA_DIR: dataDir,
  SVC_HTTP_PORT: '0',
  SVC_SMTP_PORT: '0',
  SVC_IMAP_PORT: '0',
  SVC_HOSTNAME: 'mta.test',
  SVC_LOG_LEVEL: 'info',
});

/**
 * The environment of an `svc start` child whose mail goes through this test: listenEnv on its own data
 * directory, a fresh database already migrated (databaseEnv), the admin key, the test's DNS zone (`host:port`), and,
 * given the port of a receiver here, outbound SMTP to that port on loopback (which the MTA refuses otherwise).
 */
export async function serviceEnv(
  t: Test,
  o: { dataDir: string; dns: string; outboundPort?: number },
): Promise<Record<string, string>> {
  return {
    ...listenEnv(o.dataDir),
    ...(await databaseEnv(t, o.dataDir)),
    SVC_PLATFORM_ADMIN_KEY: ADMIN_KEY,
    SVC_DNS_SERVERS: o.dns,
    ...(o.outboundPort !== undefined && { SVC_OUTBOUND_PORT: String(o.outboundPort), SVC_ALLOW_PRIVATE_MX: '1' }),
  };
}

/**
 * Where each thread of a process that does not end is waiting, from /proc (Linux): its name, its state and the
 * kernel function it sleeps in (as Linux 6.18 names them: `do_epoll_wait`, an event loop with nothing to do but
 * something that keeps it alive; `futex_do_wait`, a lock or a join, as a process.exit waiting for a thread would).
 * Said in the failure of a child that outlived its deadline, since such a hang has been seen rarely and not
 * reproduced at will.
 */
export function threadStates(pid: number | undefined): string {
  if (pid === undefined) return 'no pid';
  try {
    return readdirSync(`/proc/${pid}/task`)
      .map((tid) => {
        const at = (f: string) => {
          try {
            return readFileSync(`/proc/${pid}/task/${tid}/${f}`, 'utf8').trim();
          } catch {
            return '?';
          }
        };
        const state = at('stat')
          .replace(/^.*\) /, '')
          .split(' ')[0];
        return `${tid} ${at('comm')} ${state} ${at('wchan')}`;
      })
      .join('; ');
  } catch (err) {
    return `no /proc entry (${(err as Error).message})`;
  }
}

/**
 * The child's exit, or after `timeoutMs` an error naming the step and carrying what the child printed and where its
 * threads wait: a child that does not end fails its test within the bound, with its output, instead of holding the
 * file until tap's timeout, which reports nothing of it.
 */
export async function exitWithin(s: Svc, what: string, timeoutMs = 60_000): Promise<Exit> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const threads = threadStates(s.child.pid);
      reject(new Error(`${what}: no exit after ${timeoutMs} ms (threads: ${threads})\n${s.stdout()}\n${s.stderr()}`));
    }, timeoutMs);
  });
  try {
    return await Promise.race([s.exited, late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Waits for the 'control plane listening' line, failing early when the child exits instead. */
export async function listening(s: Svc): Promise<Record<string, unknown>> {
  return waitFor(
    () => {
      const line = s.logs().find((l) => l.msg === 'control plane listening');
      if (!line && s.exit)
        throw new Error(`svc exited ${JSON.stringify(s.exit)} before listening:\n${s.stdout()}\n${s.stderr()}`);
      return line;
    },
    { timeoutMs: 60_000, what: "'control plane listening'" },
  );
}

export const stderrLines = (s: Svc) =>
  s
    .stderr()
    .split('\n')
    .filter((l) => l.trim() !== '');

export interface Run {
  code: number | null;
  stdout: Buffer;
  /** stdout as UTF-8. */
  out: string;
  stderr: string;
  ms: number;
}

/**
 * A command of `svc` that runs and ends (`svc queue …`, `svc doctor …`) with exactly the SVC_* variables in `env`:
 * its exit code and output. Past `deadlineMs` it is killed, and its stderr ends with where its threads waited
 * (threadStates), which the test's checks of the code and stderr then show.
 */
export function runSvc(args: string[], env: Record<string, string>, deadlineMs = 60_000): Promise<Run> {
  const started = Date.now();
  const child = spawnSvc(args, env);
  const chunks: Buffer[] = [];
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => chunks.push(d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  let hung = '';
  const killer = setTimeout(() => {
    hung = `\n[svc ${args.join(' ')}: no exit after ${deadlineMs} ms; threads: ${threadStates(child.pid)}]`;
    child.kill('SIGKILL');
  }, deadlineMs);
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(killer);
      const stdout = Buffer.concat(chunks);
      resolve({ code, stdout, out: stdout.toString('utf8'), stderr: stderr + hung, ms: Date.now() - started });
    });
  });
}
