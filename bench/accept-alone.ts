// sendEmail alone, run after run: a diagnostic for work on the control plane, not a benchmark (no peer runs beside it;
// `npm run bench` compares with pgbench). The service as `svc start --role control` (nothing delivers) on a database of
// its own, a warm-up, then --runs measurements of --seconds each, back to back or --idle seconds apart, each on emptied
// messages tables and its own sockets as in `npm run bench`'s phase 3. Per run: requests per second, p50 and p99, and
// the CPU a request of each worker and of Postgres's backends (less than it was when a backend exits during the run,
// its time going with it), and the longest stall of the disk under the data directory (watchDisk) and the WAL segments
// Postgres created (watchWal), either of which holds up every durable commit in flight, the mean time a request waited
// for each shared write (the service's svc_request_wait_seconds), and the share of the run that each worker's main
// thread, Postgres's backends (summed) and the load generator's main thread spent runnable and waiting for a core
// (coreWaitSecondsSince; docs/decisions.md #83). For an A/B, run it on two checkouts in turn, several times each: one
// machine's speed moved by a fifth from one hour to the next here.
//
//   node --import ./bin/resolve-sources.ts bench/accept-alone.ts [--runs 5] [--seconds 10] [--concurrency 64]
//        [--size 1k|10k|100k|1m] [--body text|html] [--keys N] [--idempotency] [--template] [--idle 0]
//        [--warmup 30000]
//        [--pg URL] [--node-flags=--trace-gc,...]
//
// --keys N: the clients share N keys (client c sends with key c mod N); `--keys 1` is one sender calling with one key
// from every connection, as a bulk sender does (docs/decisions.md #90). Unset: a key of its own each.
// --idempotency: every message has an idempotency key of its own, as a client that retries safely sends (#91, #93).
// --template: every message names its organization's template (the text of --size, one variable) and has no body of
// its own (#92).
import os from 'node:os';
import { parseArgs } from 'node:util';
import { WAIT_STEPS, type WaitStep } from '../core/deps.js';
import {
  createTenants,
  htmlOf,
  KEYS_PER_CLIENT,
  sendLoad,
  sendLoadAlone,
  sendingSetup,
  serviceEnv,
  startChild,
  templateTextOf,
  textOfSize,
} from './service.js';
import {
  benchDatabase,
  coreWaitSecondsSince,
  cpuSecondsOf,
  cpuSecondsSince,
  emptySpool,
  freshSends,
  isBackendOf,
  PG_URL,
  quantile,
  sleep,
  svcChildren,
  walDirectory,
  watchStorage,
} from './util.js';

const { values: args } = parseArgs({
  options: {
    runs: { type: 'string', default: '5' },
    seconds: { type: 'string', default: '10' },
    concurrency: { type: 'string', default: '64' },
    size: { type: 'string', default: '1k' },
    // As npm run bench's: html posts the same words as html alone, and the control makes the text alternative.
    body: { type: 'string', default: 'text' },
    keys: { type: 'string' },
    idempotency: { type: 'boolean', default: false },
    template: { type: 'boolean', default: false },
    idle: { type: 'string', default: '0' },
    // As npm run bench's: V8 compiles a request's path with its optimizing compiler only after thousands of them.
    warmup: { type: 'string', default: '30000' },
    pg: { type: 'string', default: PG_URL },
    // Node's and V8's flags for the control, before the units' own: an A/B of a runtime setting on one checkout.
    'node-flags': { type: 'string', default: '' },
  },
});
const ORGS = 8;
const C = Number(args.concurrency);
if (args.body !== 'text' && args.body !== 'html') throw new Error('--body must be text or html');
if (args.template && args.body !== 'text')
  throw new Error("--template sends the template's text: --body html does not apply");
const TEXT = textOfSize(args.size!);
const KEYS = args.keys === undefined ? undefined : Number(args.keys);
if (KEYS !== undefined && !(Number.isInteger(KEYS) && KEYS >= 1 && KEYS <= C))
  throw new Error(`--keys must be a whole number from 1 to the concurrency (${C})`);
const load = {
  concurrency: C,
  domains: 1,
  keys: KEYS,
  idempotencyKeys: args.idempotency,
  template: args.template,
  ...(args.body === 'html' ? { html: htmlOf(TEXT) } : { text: TEXT }),
};

const cleanups: (() => Promise<unknown>)[] = [];
try {
  const db = await benchDatabase(args.pg!, 'svc_accept', cleanups);
  const { dataDir, zone } = await sendingSetup('accept', cleanups);
  const nodeFlags = args['node-flags']!.split(',').filter(Boolean);
  const ctl = await startChild('control', serviceEnv(db.url, dataDir, zone.hostPort), nodeFlags);
  cleanups.push(() => ctl.stop());
  const tenants = await createTenants(
    ctl.url,
    ORGS,
    KEYS_PER_CLIENT * Math.ceil(C / ORGS),
    args.template ? templateTextOf(TEXT) : undefined,
  );
  for (const t of tenants) for (const [host, value] of Object.entries(t.dkimTxt)) zone.txt(host, value);
  // Nothing delivers: the warm-up empties the spool as it goes (sendLoadAlone), and so does each run.
  await sendLoadAlone(ctl.url, tenants, { ...load, count: Number(args.warmup), firstIndex: 1e7 }, dataDir);

  const walDir = await walDirectory(args.pg!);
  // The cluster's workers; with one (SVC_WORKERS=1, or one core) the service runs in its own process.
  const children = svcChildren(ctl.pid);
  const workers = children.length ? children : [ctl.pid];
  const isBackend = isBackendOf(db.dbName);
  const pgCpuSince = () => cpuSecondsSince(isBackend);
  const cores = os.cpus().length;
  const keys =
    (KEYS === undefined ? '' : `, ${KEYS} key(s)`) +
    (args.idempotency ? ', idempotency keys' : '') +
    (args.template ? ', a template' : '');
  const shape = `${args.size} (${args.body}), ${C} clients${keys}, ${workers.length} worker(s), ${cores} cores`;
  console.log(`sendEmail alone, ${shape}`);
  for (let r = 0, next = 2e7; r < Number(args.runs); r++, next += 1e6) {
    if (r > 0) await sleep(Number(args.idle) * 1000);
    await freshSends(db.url);
    await emptySpool(dataDir);
    const waits0 = await waitsOf(ctl.url);
    const cpu0 = workers.map((pid) => cpuSecondsOf((p) => p.pid === pid));
    const pgCpu = pgCpuSince();
    const workerWait = workers.map((pid) => coreWaitSecondsSince((p) => p.pid === pid));
    const pgWait = coreWaitSecondsSince(isBackend);
    const benchWait = coreWaitSecondsSince((p) => p.pid === process.pid);
    const waitFrom = performance.now();
    const storage = watchStorage(dataDir, walDir);
    const benchCpu0 = process.cpuUsage();
    const a = await sendLoad(ctl.url, tenants, {
      ...load,
      untilMs: performance.now() + Number(args.seconds) * 1000,
      firstIndex: next,
    });
    const { disk: stalls, walSegmentsCreated: created } = storage();
    // Each main thread's time runnable and not running, as a share of the run's: 20% is a fifth of it. None where
    // the kernel keeps no such account.
    const seconds = (performance.now() - waitFrom) / 1000;
    const [workerSeconds, pgSeconds, benchSeconds] = [workerWait.map((w) => w()), pgWait(), benchWait()];
    const share = (s: number) => `${((s * 100) / seconds).toFixed(0)}%`;
    const coreWaits = Number.isFinite(pgSeconds)
      ? `; waited for a core: workers ${workerSeconds.map(share).join(' + ')}, ` +
        `Postgres ${share(pgSeconds)}, load generator ${share(benchSeconds)}`
      : '';
    const waits = await waitsOf(ctl.url);
    const benchCpu = process.cpuUsage(benchCpu0);
    const perRequest = (s: number) => ((s * 1000) / a.ok).toFixed(3);
    const cpu = workers.map((pid, i) => perRequest(cpuSecondsOf((p) => p.pid === pid) - cpu0[i]!));
    console.log(
      `  run ${r + 1}: ${(a.ok / ((a.endMs - a.startMs) / 1000)).toFixed(0)} req/s, ` +
        `p50 ${quantile(a.latencies, 0.5).toFixed(1)} ms, p99 ${quantile(a.latencies, 0.99).toFixed(1)} ms; ` +
        `CPU a request: workers ${cpu.join(' + ')} ms, Postgres ${perRequest(pgCpu())} ms, ` +
        `load generator ${perRequest((benchCpu.user + benchCpu.system) / 1e6)} ms; waits: ` +
        WAIT_STEPS.map((step) => {
          const [sum, n] = [waits[step].sum - waits0[step].sum, waits[step].count - waits0[step].count];
          return `${step} ${n ? ((sum / n) * 1000).toFixed(1) : '-'}`;
        }).join(', ') +
        ' ms' +
        coreWaits +
        (stalls
          ? `; ${stalls.device} stalled ${stalls.longestMs.toFixed(0)} ms at most, ${stalls.over50}× > 50 ms`
          : '') +
        (created === null ? '' : `; ${created} WAL segments created`) +
        (a.errors.size ? `; errors ${JSON.stringify([...a.errors])}` : ''),
    );
  }
} finally {
  for (const c of cleanups.reverse()) await c().catch(() => {});
}

type Waits = Record<WaitStep, { sum: number; count: number }>;

/**
 * The service's own account of a request's waits (svc_request_wait_seconds, docs/operations.md, Metrics): the sum and
 * count of each step so far, from GET /metrics (loopback is among SVC_METRICS_CIDRS by default). A run's difference
 * tells where its latency went: Postgres's statements (guard, accept) or the spool's sync.
 */
async function waitsOf(url: string): Promise<Waits> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const read = (what: string, step: string) =>
    Number(new RegExp(`^svc_request_wait_seconds_${what}\\{step="${step}"\\} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
  return Object.fromEntries(WAIT_STEPS.map((s) => [s, { sum: read('sum', s), count: read('count', s) }])) as Waits;
}
