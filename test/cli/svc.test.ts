// The real `svc` command as operators run it: `node --import ./bin/resolve-sources.ts bin/svc.ts <command>` in a child
// process, with its own data directory. When SVC_DATABASE_URL is set for the test run, children that
// touch the database get a fresh database on that server; otherwise they use the embedded default.
import t from 'tap';
import net from 'node:net';
import { readFile, readdir, stat } from 'node:fs/promises';
import { availableParallelism } from 'node:os';
import path from 'node:path';
import { waitFor } from '../helpers/wait-for.js';
import {
  SERVER_URL,
  databaseEnv,
  exitWithin,
  listenEnv,
  listening,
  stderrLines,
  svc,
  tempDir,
} from '../helpers/child.js';
import { listMigrations } from '../../storage/pg/migrate.js';
import { svcChildren } from '../helpers/processes.js';
import { routeTable, type RouteSpec } from '@svc-mail/sdk';

const ADMIN_KEY = 'cli-test-platform-admin-key-0123456789';
const EMBEDDED_WARNING = /embedded database.*power loss/i;
/** What a child given MARK_LOOP_DRY writes on stderr when its event loop ran dry (test/fixtures/mark-loop-dry.mjs). */
const LOOP_DRY = 'svc-test: the event loop ran dry';
const LOOP_DRY_FIXTURE = new URL('../fixtures/mark-loop-dry.mjs', import.meta.url).href;
const MARK_LOOP_DRY = {
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ''} --import=${LOOP_DRY_FIXTURE}`,
  LOOP_DRY_MARK: LOOP_DRY,
};

t.test('start with SVC_HTTP_PORT=abc exits non-zero with one line naming it', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start'], { ...listenEnv(dataDir), SVC_HTTP_PORT: 'abc' });
  const exit = await exitWithin(s, 'start with SVC_HTTP_PORT=abc');
  t.not(exit.code, 0, 'non-zero exit');
  t.equal(exit.code, 2, 'exit code 2: bad configuration');
  const lines = stderrLines(s);
  t.equal(lines.length, 1, `exactly one stderr line: ${JSON.stringify(s.stderr())}`);
  t.match(lines[0], /\bSVC_HTTP_PORT\b/, 'names SVC_HTTP_PORT');
  t.notMatch(s.stdout(), /control plane listening/, 'nothing started');
});

t.test('start with a malformed SVC_DNS_SERVERS exits non-zero with one line naming it', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start'], { ...listenEnv(dataDir), SVC_DNS_SERVERS: 'not a server:xx' });
  const exit = await exitWithin(s, 'start with a malformed SVC_DNS_SERVERS');
  t.not(exit.code, 0, 'non-zero exit');
  const lines = stderrLines(s);
  t.equal(lines.length, 1, `exactly one stderr line: ${JSON.stringify(s.stderr())}`);
  t.match(lines[0], /\bSVC_DNS_SERVERS\b/, 'names SVC_DNS_SERVERS');
  t.notOk(lines[0]?.includes('SVC_HTTP_PORT'), 'and no other variable');
});

t.test('a command ends by its event loop running dry, not by process.exit()', async (t) => {
  // nodejs/node#54918: process.exit() can wait for good on a compile job that waits for a collection (#80).
  const s = svc(t, ['config'], { ...listenEnv(await tempDir(t)), ...MARK_LOOP_DRY });
  const exit = await exitWithin(s, 'svc config');
  t.same(exit, { code: 0, signal: null }, 'exit 0');
  t.match(s.stdout(), /SVC_HTTP_PORT/, 'it printed the configuration');
  t.ok(s.stderr().includes(LOOP_DRY), `its loop ran dry: ${JSON.stringify(s.stderr())}`);
});

t.test('start listens, answers /health, and drains on SIGTERM', async (t) => {
  const dataDir = await tempDir(t);
  const dbEnv = await databaseEnv(t);
  const s = svc(t, ['start'], { ...listenEnv(dataDir), ...dbEnv, ...MARK_LOOP_DRY });
  const line = await listening(s);
  const port = line.http;
  t.type(port, 'number', 'the log line carries the bound http port');
  t.ok(typeof port === 'number' && port > 0 && port < 65536, `a real port (${String(port)})`);
  t.equal(line.role, 'all', 'every role by default');
  t.equal(line.publicUrl, `http://127.0.0.1:${String(port)}`, 'SVC_PUBLIC_URL defaults to http://<bind>:<port>');

  const res = await fetch(`http://127.0.0.1:${String(port)}/health`);
  t.equal(res.status, 200, 'GET /health is 200');
  const body = (await res.json()) as Record<string, unknown>;
  t.equal(body.ok, true, 'ok: true');
  t.type(body.service, 'string', 'service');
  t.ok(
    typeof body.time === 'string' && Number.isFinite(Date.parse(body.time)),
    `time is a date (${String(body.time)})`,
  );

  const warned = s.logs().some((l) => typeof l.msg === 'string' && EMBEDDED_WARNING.test(l.msg));
  if (SERVER_URL) t.notOk(warned, 'no embedded-database warning with SVC_DATABASE_URL');
  else {
    t.ok(warned, 'the start log warns that the embedded database is not power-loss safe');
    const warning = s.logs().find((l) => typeof l.msg === 'string' && EMBEDDED_WARNING.test(l.msg));
    t.equal(warning?.level, 40, 'at warn level');
    t.ok((await stat(path.join(dataDir, 'pg'))).isDirectory(), 'the embedded database lives under SVC_DATA_DIR');
  }
  t.ok((await stat(path.join(dataDir, 'lmdb'))).isDirectory(), 'LMDB lives under SVC_DATA_DIR');
  t.ok((await stat(path.join(dataDir, 'master.key'))).isFile(), 'a master key was generated into SVC_DATA_DIR');

  s.child.kill('SIGTERM');
  const exit = await exitWithin(s, 'svc start after SIGTERM');
  t.same(exit, { code: 0, signal: null }, 'SIGTERM: exit 0');
  t.ok(
    s.logs().some((l) => l.msg === 'stopped'),
    "logs 'stopped'",
  );
  // Not by a natural end, whose exit-time finalizers of native addons one MTA died in (docs/decisions.md #80).
  t.notOk(s.stderr().includes(LOOP_DRY), 'a service ends by process.exit() once stopped, not by its loop running dry');
  await t.rejects(fetch(`http://127.0.0.1:${String(port)}/health`), 'the port is closed');
});

/** How many threads of libuv's pool `pid` runs (libuv names them), 0 before the pool's first use. */
async function poolThreads(pid: number): Promise<number> {
  const tasks = await readdir(`/proc/${pid}/task`).catch(() => []);
  const names = await Promise.all(tasks.map((id) => readFile(`/proc/${pid}/task/${id}/comm`, 'utf8').catch(() => '')));
  return names.filter((n) => n.trim() === 'libuv-worker').length;
}

/** The pool sizes of a started `svc` and of its cluster workers, once one of them has started its pool. */
async function poolSizes(pid: number): Promise<number[]> {
  return waitFor(
    async () => {
      const sizes = await Promise.all([pid, ...svcChildren(pid)].map(poolThreads));
      return sizes.some((n) => n > 0) ? sizes.filter((n) => n > 0) : null;
    },
    { what: "libuv's thread pool to start" },
  );
}

t.test("libuv's pool has a thread a core, four at most, unless UV_THREADPOOL_SIZE says otherwise", async (t) => {
  // The default is what this test's own environment leaves it to (CI sets none).
  const inherited = process.env.UV_THREADPOOL_SIZE;
  const cores = inherited ? Number(inherited) : Math.min(4, availableParallelism());
  for (const [given, expected] of [
    [undefined, cores],
    ['3', 3],
  ] as const) {
    const dataDir = await tempDir(t);
    const env: Record<string, string> = { ...listenEnv(dataDir), ...(await databaseEnv(t, dataDir)) };
    if (given) env.UV_THREADPOOL_SIZE = given;
    const s = svc(t, ['start'], env);
    await listening(s);
    const sizes = await poolSizes(s.child.pid!);
    t.same(new Set(sizes), new Set([expected]), `UV_THREADPOOL_SIZE ${given ?? 'unset'}: ${expected} in each process`);
    s.child.kill('SIGTERM');
    t.same(
      await exitWithin(s, `svc start with UV_THREADPOOL_SIZE ${given ?? 'unset'} after SIGTERM`),
      { code: 0, signal: null },
      'stopped',
    );
  }
});

t.test('start --role control without SVC_DATABASE_URL names SVC_DATABASE_URL', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start', '--role', 'control'], listenEnv(dataDir));
  const exit = await exitWithin(s, 'start --role control without a database');
  t.not(exit.code, 0, 'non-zero exit');
  t.match(s.stderr(), /SVC_DATABASE_URL/, 'the message names SVC_DATABASE_URL');
  t.notMatch(s.stdout(), /control plane listening/, 'nothing started');
});

t.test(
  'start --role control with SVC_DATABASE_URL listens',
  { skip: SERVER_URL ? false : 'needs SVC_DATABASE_URL' },
  async (t) => {
    const dataDir = await tempDir(t);
    const s = svc(t, ['start', '--role', 'control'], { ...listenEnv(dataDir), ...(await databaseEnv(t)) });
    const line = await listening(s);
    t.equal(line.role, 'control');
    const res = await fetch(`http://127.0.0.1:${String(line.http)}/health`);
    t.equal(res.status, 200);
    s.child.kill('SIGTERM');
    t.same(await exitWithin(s, 'svc start --role control after SIGTERM'), { code: 0, signal: null });
  },
);

t.test('start --role imap without SVC_DATABASE_URL names SVC_DATABASE_URL', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start', '--role', 'imap'], listenEnv(dataDir));
  const exit = await exitWithin(s, 'start --role imap without a database');
  t.not(exit.code, 0, 'non-zero exit');
  t.match(s.stderr(), /SVC_DATABASE_URL/, 'the message names SVC_DATABASE_URL');
  t.notMatch(s.stdout(), /IMAP server listening/, 'nothing started');
});

t.test(
  'start --role imap with SVC_DATABASE_URL runs the IMAP server alone; SIGTERM says BYE',
  { skip: SERVER_URL ? false : 'needs SVC_DATABASE_URL' },
  async (t) => {
    const dataDir = await tempDir(t);
    const s = svc(t, ['start', '--role', 'imap'], { ...listenEnv(dataDir), ...(await databaseEnv(t)) });
    const line = await waitFor(
      () => {
        if (s.exit) throw new Error(`svc exited ${JSON.stringify(s.exit)}:\n${s.stderr()}`);
        return s.logs().find((l) => l.msg === 'IMAP server listening');
      },
      { timeoutMs: 60_000, what: 'IMAP server listening' },
    );
    t.equal(line.role, 'imap');
    t.notOk(
      s.logs().some((l) => l.msg === 'control plane listening' || l.msg === 'MTA delivering'),
      'only IMAP',
    );
    const socket = net.connect(Number(line.imap), '127.0.0.1');
    let received = '';
    socket.on('data', (d) => (received += d.toString()));
    socket.on('error', () => {});
    await waitFor(() => received.startsWith('* OK [CAPABILITY IMAP4rev1'), { what: 'the greeting' });
    s.child.kill('SIGTERM');
    await waitFor(() => received.includes('* BYE server shutting down'), { what: 'BYE on SIGTERM' });
    t.same(await exitWithin(s, 'svc start --role imap after SIGTERM'), { code: 0, signal: null });
    socket.destroy();
  },
);

t.test('start with an unknown role is bad usage', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start', '--role', 'everything'], listenEnv(dataDir));
  const exit = await exitWithin(s, 'start --role everything');
  t.equal(exit.code, 2);
  t.match(s.stderr(), /everything/);
});

t.test('migrate applies every migration once, then is up to date', async (t) => {
  const dataDir = await tempDir(t);
  const env = { SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'info', ...(await databaseEnv(t)) };
  const expected = (await listMigrations()).map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`);
  t.ok(expected.length > 0, 'there are migrations');

  const first = svc(t, ['migrate'], env);
  t.same(
    await exitWithin(first, 'the first svc migrate'),
    { code: 0, signal: null },
    `first migrate exits 0 ${first.stderr()}`,
  );
  const applied = first
    .stdout()
    .split('\n')
    .find((l) => l.startsWith('applied: '));
  t.ok(applied, `prints the applied migrations: ${first.stdout()}`);
  t.same(applied?.slice('applied: '.length).split(', '), expected, 'every migration, in order');

  const second = svc(t, ['migrate'], env);
  t.same(await exitWithin(second, 'the second svc migrate'), { code: 0, signal: null }, 'second migrate exits 0');
  t.ok(second.stdout().split('\n').includes('up to date'), `second run prints 'up to date': ${second.stdout()}`);
  t.notMatch(second.stdout(), /^applied:/m, 'and applies nothing');
});

t.test('migrate --status lists applied and pending migrations and applies nothing', async (t) => {
  const dataDir = await tempDir(t);
  const env = { SVC_DATA_DIR: dataDir, SVC_LOG_LEVEL: 'info', ...(await databaseEnv(t)) };
  const labels = (await listMigrations()).map((m) => `${String(m.version).padStart(4, '0')}_${m.name}`);
  const status = async (what: string) => {
    const s = svc(t, ['migrate', '--status'], env);
    t.same(
      await exitWithin(s, `svc migrate --status (${what})`),
      { code: 0, signal: null },
      `${what}: exit 0 ${s.stderr()}`,
    );
    const lines = s
      .stdout()
      .split('\n')
      .filter((l) => l && !l.startsWith('{'));
    return {
      lines,
      applied: lines.flatMap((l) => /^applied {2}(\S+) {2}(\S+)$/.exec(l)?.slice(1, 3) ?? []),
      pending: lines.flatMap((l) => /^pending {2}(\S+)$/.exec(l)?.[1] ?? []),
    };
  };

  const fresh = await status('a fresh database');
  t.same(fresh.pending, labels, 'every migration pending, in order');
  t.same(fresh.applied, [], 'none applied');
  t.equal(fresh.lines.at(-1), `0 applied, ${labels.length} pending`, 'the total');
  t.same((await status('asked again')).pending, labels, 'still every one pending: --status applied nothing');

  const m = svc(t, ['migrate'], env);
  t.same(await exitWithin(m, 'svc migrate'), { code: 0, signal: null }, `migrate exits 0 ${m.stderr()}`);
  const after = await status('after migrate');
  t.same(after.pending, [], 'nothing pending');
  const names = after.applied.filter((_, i) => i % 2 === 0);
  const times = after.applied.filter((_, i) => i % 2 === 1);
  t.same(names, labels, 'every migration applied, in order');
  t.ok(
    times.every((x) => Number.isFinite(Date.parse(x)) && x.endsWith('Z')),
    `each with when: ${times.join(' ')}`,
  );
  t.equal(after.lines.at(-1), `${labels.length} applied, 0 pending`);

  const bad = svc(t, ['migrate', '--stauts'], env);
  t.equal((await exitWithin(bad, 'svc migrate --stauts')).code, 2, 'an unknown option is bad usage');
  t.match(bad.stderr(), /--stauts/, 'named on stderr');
});

t.test('config prints the effective configuration, secrets redacted', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['config'], { SVC_DATA_DIR: dataDir, SVC_HTTP_PORT: '8123', SVC_PLATFORM_ADMIN_KEY: ADMIN_KEY });
  t.same(await exitWithin(s, 'svc config'), { code: 0, signal: null });
  t.match(s.stdout(), /^SVC_HTTP_PORT=8123$/m, 'prints SVC_HTTP_PORT');
  t.match(s.stdout(), /^SVC_PLATFORM_ADMIN_KEY=\(set, redacted\)$/m, 'SVC_PLATFORM_ADMIN_KEY is redacted');
  t.notOk(s.stdout().includes(ADMIN_KEY), 'the key never appears');
  t.notOk(s.stderr().includes(ADMIN_KEY), 'not on stderr either');
});

t.test('openapi prints a document covering the route table', async (t) => {
  const s = svc(t, ['openapi'], {});
  t.same(await exitWithin(s, 'svc openapi'), { code: 0, signal: null });
  const doc = JSON.parse(s.stdout()) as {
    openapi?: string;
    paths?: Record<string, Record<string, { operationId?: string }>>;
  };
  t.match(doc.openapi, /^3\./, 'an OpenAPI 3 document');
  const routes = Object.entries(routeTable) as [string, RouteSpec][];
  t.ok(routes.length > 0);
  for (const [name, r] of routes) {
    t.ok(doc.paths && r.path in doc.paths, `paths has ${r.path}`);
    t.equal(doc.paths?.[r.path]?.[r.method.toLowerCase()]?.operationId, name, `${r.method} ${r.path} is ${name}`);
  }
});

t.test('an unknown command is bad usage', async (t) => {
  const s = svc(t, ['frobnicate'], {});
  t.equal((await exitWithin(s, 'svc frobnicate')).code, 2);
  t.match(s.stderr(), /unknown command/);
});
