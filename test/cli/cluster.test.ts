// `svc start` on several processes (SVC_WORKERS; bin/cluster.ts, docs/decisions.md #60): one port served by
// every worker, the metrics of all of them added up, a worker killed with SIGKILL started again while the
// others serve, SIGTERM draining the lot, and a worker that cannot start stopping the start. Several workers
// need a real Postgres (the embedded database lives in one process), so most of this is the Postgres CI pass.
import t from 'tap';
import http from 'node:http';
import net from 'node:net';
import { existsSync } from 'node:fs';
import { waitFor } from '../helpers/wait-for.js';
import { databaseEnv, exitWithin, listenEnv, svc, tempDir, type Svc } from '../helpers/child.js';
import { svcChildren } from '../helpers/processes.js';

const needsPostgres = process.env.SVC_DATABASE_URL
  ? false
  : 'several workers need SVC_DATABASE_URL: the embedded database lives in one process';

/** GET over a connection of its own (no keep-alive): each request is a new connection the cluster hands out. */
function get(port: number, path: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

const logged = (s: Svc, msg: string) => s.logs().filter((l) => l.msg === msg);

async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The sum of a Prometheus text's samples of `name` whose labels include `labels`. */
function sample(text: string, name: string, labels: string): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{`) && l.includes(labels))
    .reduce((sum, l) => sum + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

t.test(
  'two workers share the ports, add up their metrics, survive a SIGKILL and drain',
  { skip: needsPostgres },
  async (t) => {
    const dataDir = await tempDir(t);
    const metricsPort = await freePort();
    const s = svc(t, ['start'], {
      ...listenEnv(dataDir),
      ...(await databaseEnv(t, dataDir)),
      SVC_WORKERS: '2',
      SVC_METRICS_PORT: String(metricsPort),
      SVC_METRICS_CIDRS: '127.0.0.0/8',
    });
    await waitFor(
      () => {
        if (s.exit) throw new Error(`svc exited ${JSON.stringify(s.exit)}:\n${s.stdout()}\n${s.stderr()}`);
        return logged(s, 'all workers started').length > 0;
      },
      { timeoutMs: 90_000, what: "'all workers started'" },
    );
    // A worker's lines and the primary's reach the pipe in no fixed order: wait for both workers' own.
    const listening = await waitFor(
      () => {
        const lines = logged(s, 'control plane listening');
        return lines.length >= 2 ? lines : null;
      },
      { timeoutMs: 10_000, what: "both workers' 'control plane listening'" },
    );
    t.same(new Set(listening.map((l) => l.worker)), new Set([0, 1]), 'each worker runs the control plane');
    const port = listening[0]!.http as number;
    t.ok(
      listening.every((l) => l.http === port),
      `on one port (${port})`,
    );
    t.equal(logged(s, 'IMAP server listening').length, 2, 'and the IMAP server');
    t.equal(logged(s, 'MX listener accepting').length, 2, 'and the MX listener');

    const requests = 40;
    for (let i = 0; i < requests; i++) t.equal((await get(port, '/health')).status, 200);
    const served = await waitFor(
      () => {
        const workers = new Set(
          s
            .logs()
            .filter((l) => l.msg === 'http request' && l.route === 'health')
            .map((l) => l.worker),
        );
        return workers.size === 2 && workers;
      },
      { timeoutMs: 10_000, what: 'health requests logged by both workers' },
    );
    t.same(served, new Set([0, 1]), 'connections are handed to both workers');

    // Both the HTTP port and SVC_METRICS_PORT serve the sum of every worker's counters.
    const viaHttp = await get(port, '/metrics');
    t.equal(viaHttp.status, 200, 'GET /metrics on the HTTP port');
    t.equal(
      sample(viaHttp.body, 'svc_http_requests_total', 'route="health"'),
      requests,
      'the health requests of both workers, added up',
    );
    const viaListener = await get(metricsPort, '/metrics');
    t.equal(viaListener.status, 200, 'GET /metrics on SVC_METRICS_PORT');
    t.equal(sample(viaListener.body, 'svc_http_requests_total', 'route="health"'), requests, 'the same sum there');
    t.equal(
      viaListener.body.split('\n').filter((l) => l.startsWith('svc_outbound_queue_messages ')).length,
      1,
      'a gauge of the shared spool appears once',
    );

    const before = svcChildren(s.child.pid!);
    t.equal(before.length, 2, `two worker processes (${before.join(', ')})`);
    process.kill(before[0]!, 'SIGKILL');
    await waitFor(() => logged(s, 'worker exited; starting another').length === 1, {
      timeoutMs: 10_000,
      what: "'worker exited; starting another'",
    });
    t.equal((await get(port, '/health')).status, 200, 'the other worker serves meanwhile');
    await waitFor(() => logged(s, 'control plane listening').length === 3, {
      timeoutMs: 60_000,
      what: 'the new worker listening',
    });
    const after = svcChildren(s.child.pid!);
    t.equal(after.length, 2, 'two workers again');
    t.notOk(after.includes(before[0]!), 'the killed one replaced');

    s.child.kill('SIGTERM');
    const exit = await exitWithin(s, 'the cluster after SIGTERM');
    t.same(exit, { code: 0, signal: null }, 'SIGTERM drains every worker and exits 0');
    t.equal(logged(s, 'stopped').filter((l) => l.worker !== undefined).length, 2, 'each worker stopped');
    t.same(svcChildren(s.child.pid!), [], 'no worker left behind');
  },
);

t.test('the primary killed with -9: its workers end too', { skip: needsPostgres }, async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start'], { ...listenEnv(dataDir), ...(await databaseEnv(t, dataDir)), SVC_WORKERS: '2' });
  await waitFor(
    () => {
      if (s.exit) throw new Error(`svc exited ${JSON.stringify(s.exit)}:\n${s.stdout()}\n${s.stderr()}`);
      return logged(s, 'all workers started').length > 0;
    },
    { timeoutMs: 90_000, what: "'all workers started'" },
  );
  const workers = svcChildren(s.child.pid!);
  t.equal(workers.length, 2, 'two workers');
  // Node's own exit on the lost channel could hang in lmdb-js when a spool write was under way (orphans seen
  // after test/mta/crash-cycles.test.ts under load); an idle worker exits either way, so this guards the rule
  // that workers end with their primary, not that race.
  s.child.kill('SIGKILL');
  await exitWithin(s, 'the primary after SIGKILL');
  const alive = () => workers.filter((pid) => existsSync(`/proc/${pid}`));
  await waitFor(() => alive().length === 0, { timeoutMs: 10_000, what: 'the workers gone' }).catch(() => {
    for (const pid of alive()) process.kill(pid, 'SIGKILL');
    t.fail(`workers left running: ${alive().join(', ')}`);
  });
  t.same(alive(), [], 'no worker outlives its primary');
});

t.test('a worker that cannot start stops the start', { skip: needsPostgres }, async (t) => {
  const dataDir = await tempDir(t);
  const taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise((resolve) => taken.close(resolve)));
  const s = svc(t, ['start'], {
    ...listenEnv(dataDir),
    ...(await databaseEnv(t, dataDir)),
    SVC_WORKERS: '2',
    SVC_HTTP_PORT: String((taken.address() as net.AddressInfo).port),
  });
  const exit = await exitWithin(s, 'the cluster on a taken port');
  t.equal(exit.code, 1, 'exit code 1');
  t.ok(logged(s, 'a worker failed to start; stopping').length >= 1, 'the primary says why');
});

t.test('with the embedded database one process runs, whatever SVC_WORKERS says', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start'], { ...listenEnv(dataDir), SVC_WORKERS: '2' });
  await waitFor(
    () => {
      if (s.exit) throw new Error(`svc exited ${JSON.stringify(s.exit)}:\n${s.stdout()}\n${s.stderr()}`);
      return logged(s, 'control plane listening').length > 0;
    },
    { timeoutMs: 60_000, what: "'control plane listening'" },
  );
  t.ok(
    s.logs().some((l) => typeof l.msg === 'string' && l.msg.startsWith('one process: the embedded database')),
    'it says so',
  );
  t.equal(logged(s, 'starting workers').length, 0, 'no cluster');
  t.same(svcChildren(s.child.pid!), [], 'no worker process');
  s.child.kill('SIGTERM');
  t.equal((await exitWithin(s, 'the single process after SIGTERM')).code, 0, 'drains and exits 0');
});
