// `npm run bench`: throughput of the platform beside Debian's Postfix and beside pgbench, in one run on
// one machine (issue 5). Sequential phases, so they never compete for the cores:
//
//   1. end to end: N sendEmail requests (SDK, signed, 64 in flight) to the service, compiled as operators run
//      it (bench/service.ts): its control and mta roles as two child processes on one spool, or with
//      --one-process one `--role all` → its MTA, DKIM signing, delivering through a loopback DNS zone's MX
//      → smtp-sink. From the first request to the N-th message counted by the sink.
//   2. Postfix: smtp-source (64 sessions) → a private Postfix relaying to an identical smtp-sink, the
//      same N messages (same size, one recipient each). From smtp-source's start to the N-th message.
//   3. sendEmail alone (the service with --role control: nothing delivers) for --seconds at 64
//      clients, then sendBatch (100 messages a request, 8 clients) for as long, beside pgbench running
//      bench/accept.sql, the same work per send, on the same Postgres. Each of these measurements starts
//      with the messages tables emptied (freshSends), so that none pays for the rows of the one before, and
//      watches the disk under the data directory for stalls (watchDisk) and Postgres's pg_wal for the WAL segments
//      it creates (watchWal); the report gives pgbench's p99 at sendEmail's concurrency beside sendEmail's.
//
// Both end-to-end sides first send untimed warm-up messages: ours --warmup, since a service runs for days and V8 gives
// a function to Turbofan only after ~3,000 calls' worth of its bytecode (--invocation-count-for-turbofan); Postfix
// --postfix-warmup, fewer, since its processes are compiled C and more messages only slowed it as its queue
// directories grew. The measurements are in the README (Benchmarks). The sinks' dumps of each warm-up are deleted.
// Needs root (postfix start), Debian's postfix (smtp-source, smtp-sink), pgbench, and a PostgreSQL
// server (--pg, default postgres://postgres@127.0.0.1:5432/postgres) where it creates a database of its
// own and drops it at the end.
//
//   node --import ./bin/resolve-sources.ts bench/run.ts [--messages 10000] [--concurrency 64] [--seconds 10] [--orgs 8]
//                                   [--warmup 30000] [--postfix-warmup 2000] [--runs 5]
//                                   [--size 1k|10k|100k|1m] [--body text|html] [--domains 1|100]
//                                   [--pgbench-clients 1,4,8,16,32,64] [--pg URL]
//                                   [--one-process] [--cpu-prof] [--node-flags='…'] [--workers N|C,M]
//                                   [--out latest.json]
//
// --body html posts the same words as html alone (the service makes the text alternative). --node-flags gives every
// service process more of Node's or V8's flags, for a diagnosis (with "=": the value starts with "--"):
// `--node-flags=--trace-gc-nvp` (each collection), `--node-flags=--trace-incremental-marking` (why each full
// collection started), `--node-flags=--perf-basic-prof` (for `perf record`); several in one value, space-separated.
// --workers sets SVC_WORKERS of each service process, or with two numbers (`--workers 1,2`) of the control's and
// of the mta's. Unset, each role gets its share of the cores, as docs/operations.md (Workers) tells an operator
// whose roles share a host: half each for the control and the mta, all of them for `--one-process`.
// `--workers default` leaves SVC_WORKERS unset: the service's own default, one per core in each role's process,
// which on a host running both roles is twice as many processes as cores. The cores: run the whole bench under taskset
// (`taskset -c 0 npm run bench`, then `-c 0,1`) and both sides, the load generators and the sinks get the same
// cores, and so does the system's Postgres, whose processes are pinned for the run and put back after (pinPostgres:
// before, a one-core run of ours had a second core for its database, which flattered our one-core figure).
//
// Phases 1 and 2 alternate --runs times (svc first, then Postfix first, ...), and phase 3 measures sendEmail
// and the pgbench sweep once a run; the report gives each figure's median and range over the runs.
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { MAX_BATCH, routeTable } from '@svc-mail/sdk';
import { composeMessage } from '../mail/compose.js';
import { startSink, type Sink } from './sink.js';
import { startRelay, type Relay } from './postfix.js';
import { startOpenDkim } from './opendkim.js';
import {
  createTenants,
  KEYS_PER_CLIENT,
  sendLoad,
  sendLoadAlone,
  startChild,
  type Child,
  SUBJECT,
  sendingSetup,
  serviceEnv,
  SIZES,
  textOfSize,
  htmlOf,
  recipientDomain,
  type LoadResult,
} from './service.js';
import {
  analyzeSends,
  benchDatabase,
  coreWaitSecondsSince,
  cpuSecondsSince,
  emptySpool,
  freshSends,
  isBackendOf,
  machineCpu,
  fixed,
  machineShare,
  median,
  medianRange,
  PG_URL,
  pinPostgres,
  undelivered,
  quantile,
  sleep,
  span,
  walDirectory,
  watchStorage,
} from './util.js';

const run = promisify(execFile);
const HERE = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(import.meta.url);
const { dkimVerify } = require('mailauth/lib/dkim/verify.js') as {
  dkimVerify(
    raw: Buffer,
    o: { resolver: (name: string, type: string) => Promise<string[][]> },
  ): Promise<{ results: { status: { result: string } }[] }>;
};

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '10000' },
    concurrency: { type: 'string', default: '64' },
    seconds: { type: 'string', default: '10' },
    orgs: { type: 'string', default: '8' },
    warmup: { type: 'string', default: '30000' },
    'postfix-warmup': { type: 'string', default: '2000' },
    runs: { type: 'string', default: '5' },
    size: { type: 'string', default: '1k' },
    body: { type: 'string', default: 'text' },
    domains: { type: 'string', default: '1' },
    'pgbench-clients': { type: 'string', default: '1,4,8,16,32,64' },
    pg: { type: 'string', default: PG_URL },
    'cpu-prof': { type: 'boolean', default: false },
    'node-flags': { type: 'string', default: '' },
    'one-process': { type: 'boolean', default: false },
    opendkim: { type: 'boolean', default: false },
    workers: { type: 'string' },
    out: { type: 'string', default: 'latest.json' },
  },
});
const N = Number(args.messages);
const C = Number(args.concurrency);
const SECONDS = Math.max(3, Number(args.seconds));
const ORGS = Number(args.orgs);
const WARMUP = Number(args.warmup);
const PF_WARMUP = Number(args['postfix-warmup']);
const RUNS = Math.max(1, Number(args.runs));
const SIZE = args.size!;
// sendBatch's messages a request: its most (MAX_BATCH), or as many as fit its request body's limit with a kB each for
// the JSON around a message (9 at --size 1m).
const BATCH = Math.min(MAX_BATCH, Math.floor(routeTable['v1.services.sendBatch'].bodyLimit / (SIZES[SIZE]! + 1024)));
const BODY = textOfSize(SIZE);
// --body html: the same words posted as html alone, so that the service makes the text alternative (as a sender
// of html-only mail has it do); Postfix relays the message our composer makes of it.
if (args.body !== 'text' && args.body !== 'html') throw new Error('--body must be text or html');
const CONTENT = args.body === 'html' ? { html: htmlOf(BODY) } : { text: BODY };
const DOMAINS = Math.max(1, Number(args.domains));
const PGBENCH_CLIENTS = args['pgbench-clients']!.split(',').map(Number);
// SVC_WORKERS of the service processes ("N" or "control,mta"), null to leave it unset (see --workers above). The
// share is half the cores each: on a 2-core machine one worker a role delivered 2.11× Postfix where the service's
// default (two each) gave 1.87×, since a second worker halves every batch and is preempted beside the others
// (README, Benchmarks; docs/decisions.md #70).
const SHARE = String(Math.max(1, Math.floor(os.availableParallelism() / 2)));
const WORKERS: string | null =
  args.workers === 'default'
    ? null
    : (args.workers ?? (args['one-process'] ? String(os.availableParallelism()) : `${SHARE},${SHARE}`));
if (WORKERS !== null && !/^[1-9]\d*(,[1-9]\d*)?$/.test(WORKERS)) throw new Error('--workers must be N, C,M or default');

/** The median and range of a figure over the runs, and the runs. */
const spread = (xs: number[]) => ({ ...medianRange(xs), runs: xs });
// How long the last message may take to arrive after the last request (a first delivery attempt
// that fails waits SVC_RETRY_DELAYS' first step, a minute: that is a failure of the run, not slowness).
const DRAIN_MS = 60_000;

for (const tool of ['/usr/sbin/postfix', '/usr/sbin/smtp-source', '/usr/sbin/smtp-sink'])
  accessSync(tool, constants.X_OK);
await run('pgbench', ['--version']).catch(() => {
  throw new Error(
    'pgbench not found (Debian 12: part of postgresql-15, e.g. apt-get install postgresql-contrib; ' +
      'from PostgreSQL 16 on, postgresql-client-16)',
  );
});

const failures: string[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
const cleanup = async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch((err) => console.error(`cleanup: ${err}`));
};
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => void cleanup().finally(() => process.exit(130)));

const results: Record<string, unknown> = {};
const profDir = path.join(os.tmpdir(), `svc-bench-prof-${Date.now().toString(36)}`);
// Other work on the machine skews every figure here: say how busy it was when the run began.
const loadAtStart = os.loadavg()[0]!;
// The cores the system's Postgres was pinned to for the run (under taskset), or null: not pinned.
let postgresCores: string | null = null;
try {
  // ---- shared setup: a database, a data dir, a DNS zone with the recipients' MX -------------------
  const created = await benchDatabase(args.pg, 'svc_bench', cleanups);
  postgresCores = await pinPostgres(args.pg!, cleanups);
  const walDir = await walDirectory(args.pg!);
  const dbName = created.dbName;
  results.postgres = created.version;
  const dbUrl = new URL(created.url);

  const { dataDir, zone } = await sendingSetup('bench', cleanups);
  // --domains: each recipient domain its own MX record, all on the one sink (sized never to be the bottleneck).
  for (let d = 0; d < DOMAINS; d++) zone.mx(recipientDomain(d, DOMAINS), 10, 'mx.dest.test');
  const nodeFlags = [
    ...(args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []),
    ...args['node-flags']!.split(' ').filter(Boolean),
  ];
  const env = serviceEnv(dbUrl.toString(), dataDir, zone.hostPort);

  // ---- 1 and 2. end to end: the service, and the same through Postfix, --runs times in turn -----------
  const ourSink = await startSink('svc');
  cleanups.push(() => ourSink.stop());
  const svc = await startService({ ...env, SVC_OUTBOUND_PORT: String(ourSink.port) }, nodeFlags);
  cleanups.push(() => svc.stop());
  const tenants = await createTenants(svc.url, ORGS, KEYS_PER_CLIENT * Math.ceil(C / ORGS));
  for (const t of tenants) for (const [host, value] of Object.entries(t.dkimTxt)) zone.txt(host, value);
  const load = { concurrency: C, ...CONTENT, domains: DOMAINS };
  checked('svc warm-up', await sendLoad(svc.url, tenants, { ...load, count: WARMUP }), WARMUP);
  await ourSink.reached(WARMUP, DRAIN_MS).catch(async (err: Error) => {
    throw new Error(`${err.message} (warm-up)\n${await undelivered(dbUrl.toString(), dataDir)}`);
  });
  await ourSink.clear(WARMUP);
  await analyzeSends(dbUrl.toString());
  const isBackend = isBackendOf(dbName);
  const pgCpuSince = () => cpuSecondsSince(isBackend);
  let svcSent = WARMUP;
  const runSvc = async () => {
    const cpu0 = svc.cpuSeconds();
    const roleCpu0 = svc.roles.map((r) => r.cpuSeconds());
    const pgCpu = pgCpuSince();
    const benchCpu0 = process.cpuUsage();
    const machine0 = machineCpu();
    const e2e = await sendLoad(svc.url, tenants, { ...load, count: N, firstIndex: svcSent });
    svcSent += N;
    const end = await ourSink.reached(svcSent, DRAIN_MS).catch(async (err: Error) => {
      failures.push(`${err.message}\n${await undelivered(dbUrl.toString(), dataDir)}`);
      return NaN;
    });
    const machine = machineShare(machine0, machineCpu(), N);
    checked('svc end to end', e2e, N);
    // The load generator shares the cores (smtp-source does too, for Postfix): what it cost us.
    const benchCpu = process.cpuUsage(benchCpu0);
    const seconds = (end - e2e.startMs) / 1000;
    return {
      seconds,
      msgPerSec: N / seconds,
      acceptedPerSec: N / ((e2e.endMs - e2e.startMs) / 1000),
      cpuMsPerMessage: ((svc.cpuSeconds() - cpu0) * 1000) / N,
      roleCpuMsPerMessage: Object.fromEntries(
        svc.roles.map((r, i) => [r.role, ((r.cpuSeconds() - roleCpu0[i]!) * 1000) / N]),
      ),
      pgCpuMsPerMessage: (pgCpu() * 1000) / N,
      loadGenCpuMsPerMessage: (benchCpu.user + benchCpu.system) / 1000 / N,
      ...machine,
    };
  };

  // in_flow_delay 0: with the default (1 s), smtpd holds back each message whenever the queue
  // manager lags, which here halved Postfix's throughput; we compare with the faster setting.
  const pfOverrides = { in_flow_delay: '0' };
  const t = tenants[0]!;
  // A Postfix side: its own sink and relay (`extra` settings over pfOverrides), warmed up, and its runs.
  const postfixSide = async (name: string, extra: Record<string, string>, extraCpu: () => number = () => 0) => {
    const sink = await startSink(name);
    cleanups.push(() => sink.stop());
    const relay = await startRelay(sink.port, { ...pfOverrides, ...extra });
    cleanups.push(() => relay.stop());
    // The same message our service composes (without its DKIM signatures), as smtp-source -F sends a file.
    const eml = await composeMessage({
      from: { name: 'Bench', address: `no-reply@${t.domain}` },
      to: 'rcpt@dest.test',
      subject: `${SUBJECT} 1234`,
      ...CONTENT,
      messageId: `${randomBytes(16).toString('hex')}@${t.domain}`,
      date: new Date(),
    });
    const emlFile = path.join(relay.dir, 'message.eml');
    await writeFile(emlFile, eml.toString('latin1').replace(/\r\n/g, '\n')); // -F appends CRLF to each line
    const source = (count: number) => smtpSource(relay, emlFile, t.domain, count);
    await source(PF_WARMUP);
    await sink.reached(PF_WARMUP, DRAIN_MS);
    await sink.clear(PF_WARMUP);
    let sent = PF_WARMUP;
    const measure = async () => {
      const cpu0 = relay.cpuSeconds() + extraCpu();
      const machine0 = machineCpu();
      const start = performance.now();
      await source(N).catch((err: { stderr?: string }) => failures.push(`smtp-source: ${err.stderr ?? err}`));
      sent += N;
      const end = await sink.reached(sent, DRAIN_MS).catch(async (err: Error) => {
        failures.push(`${err.message}\n${(await relay.log()).split('\n').slice(-10).join('\n')}`);
        return NaN;
      });
      const machine = machineShare(machine0, machineCpu(), N);
      const seconds = (end - start) / 1000;
      const cpu = relay.cpuSeconds() + extraCpu() - cpu0;
      return { seconds, msgPerSec: N / seconds, cpuMsPerMessage: (cpu * 1000) / N, ...machine };
    };
    return { name, sink, relay, measure, timed: () => sent - PF_WARMUP };
  };
  const pf = await postfixSide('postfix', {});
  // --opendkim: a second Postfix that signs through Debian's OpenDKIM milter (bench/opendkim.ts), as ours signs.
  const odkim = args.opendkim ? await startOpenDkim(t.domain) : null;
  if (odkim) {
    cleanups.push(() => odkim.stop());
    zone.txt(`${odkim.selector}._domainkey.${t.domain}`, odkim.txt);
  }
  const pfd = odkim
    ? await postfixSide(
        'postfix-dkim',
        // tempfail: a message the milter cannot sign waits, never leaves unsigned (as ours, issue 5).
        { smtpd_milters: odkim.milter, milter_default_action: 'tempfail' },
        () => odkim.cpuSeconds(),
      )
    : null;

  // Each run measures every side back to back, the first side alternating, so that a busy spell of the
  // machine falls on all alike; the ratio of each run is what the report takes the median of.
  type SideRun = Awaited<ReturnType<typeof pf.measure>>;
  const svcRuns: Awaited<ReturnType<typeof runSvc>>[] = [];
  const pfRuns: SideRun[] = [];
  const pfdRuns: SideRun[] = [];
  for (let r = 0; r < RUNS; r++) {
    const sides = [
      async () => void svcRuns.push(await runSvc()),
      async () => void pfRuns.push(await pf.measure()),
      ...(pfd ? [async () => void pfdRuns.push(await pfd.measure())] : []),
    ];
    for (const side of r % 2 === 0 ? sides : sides.reverse()) await side();
  }
  // A process that ends badly at its stop (docs/decisions.md #80) fails the run, its figures kept.
  await svc.stop().catch((err: Error) => failures.push(`the service's stop after its runs: ${err.message}`));
  for (const side of [pf, pfd]) {
    if (!side) continue;
    const count = (await side.sink.files()).length;
    if (count !== side.timed()) failures.push(`${side.name} sink holds ${count} messages, expected ${side.timed()}`);
  }
  results.svc = {
    processes: svc.roles.map((r) => r.role),
    runs: svcRuns,
    dkim: await checkSigned('svc', ourSink, svcSent - WARMUP, Object.assign({}, ...tenants.map((t) => t.dkimTxt))),
  };
  results.postfix = { version: pf.relay.version, runs: pfRuns };
  results.endToEnd = spread(svcRuns.map((s, i) => s.msgPerSec / pfRuns[i]!.msgPerSec));
  if (pfd && odkim) {
    results.postfixOpenDkim = {
      runs: pfdRuns,
      dkim: await checkSigned('postfix-dkim', pfd.sink, pfd.timed(), {
        [`${odkim.selector}._domainkey.${t.domain}`]: odkim.txt,
      }),
    };
    results.endToEndOpenDkim = spread(svcRuns.map((s, i) => s.msgPerSec / pfdRuns[i]!.msgPerSec));
    await pfd.relay.stop();
  }
  await pf.relay.stop();

  // ---- 3. sendEmail alone, sendBatch, then pgbench with the same statements -------------------------
  const ctl = await startChild('control', { ...env, ...workersOf('control') }, nodeFlags);
  cleanups.push(() => ctl.stop());
  // Nothing delivers in this phase: the warm-ups empty the spool as they go (sendLoadAlone), and so does each run.
  const warm = await sendLoadAlone(ctl.url, tenants, { ...load, count: WARMUP, firstIndex: 1e7 }, dataDir);
  checked('control warm-up', warm, warm.expected);
  // pgbench's backends are gone when it returns (and their CPU time with them): sample while it runs.
  const pgbenchAt = async (clients: number) => {
    await freshSends(dbUrl.toString());
    const storage = storageOf(dataDir, walDir);
    const running = pgbench(dbUrl.toString(), ORGS, clients, SECONDS);
    await sleep(1_000);
    const [pgCpu, w1, m1] = [pgCpuSince(), performance.now(), machineCpu()];
    await sleep((SECONDS - 2) * 1_000);
    const [pgSeconds, w2, m2] = [pgCpu(), performance.now(), machineCpu()];
    const pgb = await running;
    const { machineBusy } = machineShare(m1, m2, pgb.transactions);
    const pgCpuMsPerTx = (pgSeconds / ((w2 - w1) / 1000) / pgb.tps) * 1000;
    return { clients, ...pgb, pgCpuMsPerTx, machineBusy, ...storage() };
  };
  const sendRuns: Record<string, number>[] = [];
  type PgbenchAt = Awaited<ReturnType<typeof pgbenchAt>>;
  const pgbenchRuns: {
    best: PgbenchAt;
    sweep: Pick<PgbenchAt, 'clients' | 'tps' | 'p99Ms' | 'diskStallMs' | 'walSegmentsCreated'>[];
  }[] = [];
  let next = 2e7;
  for (let r = 0; r < RUNS; r++) {
    await freshSends(dbUrl.toString());
    await emptySpool(dataDir);
    const ctlCpu0 = ctl.cpuSeconds();
    const pgCpu = pgCpuSince();
    const machine0 = machineCpu();
    const storage = storageOf(dataDir, walDir);
    const benchCpu0 = process.cpuUsage();
    // The share of the run each side's main threads spent runnable and waiting for a core (docs/decisions.md #83).
    const waits = [
      coreWaitSecondsSince((p) => p.pid === ctl.pid || p.ppid === ctl.pid),
      coreWaitSecondsSince(isBackend),
      coreWaitSecondsSince((p) => p.pid === process.pid),
    ];
    const waitFrom = performance.now();
    const alone = await sendLoad(ctl.url, tenants, {
      ...load,
      untilMs: performance.now() + SECONDS * 1000,
      firstIndex: next,
    });
    const [svcWait, pgWait, loadGenWait] = waits.map((w) => w() / ((performance.now() - waitFrom) / 1000));
    const { machineBusy } = machineShare(machine0, machineCpu(), alone.ok);
    const benchCpu = process.cpuUsage(benchCpu0);
    next += alone.ok + alone.errors.size + 1e6;
    checked('sendEmail alone', alone);
    sendRuns.push({
      rps: alone.ok / ((alone.endMs - alone.startMs) / 1000),
      requests: alone.ok,
      p50Ms: quantile(alone.latencies, 0.5),
      p99Ms: quantile(alone.latencies, 0.99),
      cpuMsPerRequest: ((ctl.cpuSeconds() - ctlCpu0) * 1000) / alone.ok,
      pgCpuMsPerRequest: (pgCpu() * 1000) / alone.ok,
      loadGenCpuMsPerRequest: (benchCpu.user + benchCpu.system) / 1000 / alone.ok,
      machineBusy,
      svcCoreWait: svcWait!,
      pgCoreWait: pgWait!,
      loadGenCoreWait: loadGenWait!,
      ...storage(),
    });
    // pgbench at the client count where it is fastest on this machine, found in the same run.
    const sweep: PgbenchAt[] = [];
    for (const clients of PGBENCH_CLIENTS) sweep.push(await pgbenchAt(clients));
    const best = sweep.reduce((a, b) => (b.tps > a.tps ? b : a));
    pgbenchRuns.push({
      best,
      sweep: sweep.map(({ clients, tps, p99Ms, diskStallMs, walSegmentsCreated }) => ({
        clients,
        tps,
        p99Ms,
        diskStallMs,
        walSegmentsCreated,
      })),
    });
  }
  // sendBatch (issue 16 item 7): the same messages, 100 a request, from 8 clients (a batch is already
  // many sends in flight); messages per second beside single sends'.
  const batchC = Math.min(8, C);
  await emptySpool(dataDir);
  const batchWarm = await sendLoadAlone(
    ctl.url,
    tenants,
    { ...load, concurrency: batchC, count: WARMUP, firstIndex: 3e8, batch: BATCH },
    dataDir,
  );
  checked('sendBatch warm-up', batchWarm, batchWarm.expected);
  await freshSends(dbUrl.toString());
  const batchCpu0 = ctl.cpuSeconds();
  const batched = await sendLoad(ctl.url, tenants, {
    ...load,
    concurrency: batchC,
    untilMs: performance.now() + SECONDS * 1000,
    firstIndex: 4e8,
    batch: BATCH,
  });
  checked('sendBatch alone', batched);
  const batchCpuMs = (ctl.cpuSeconds() - batchCpu0) * 1000;
  await ctl.stop().catch((err: Error) => failures.push(`the control's stop after sending alone: ${err.message}`));
  results.sendEmail = { runs: sendRuns };
  results.sendBatch = {
    batch: BATCH,
    clients: batchC,
    msgPerSec: batched.ok / ((batched.endMs - batched.startMs) / 1000),
    messages: batched.ok,
    p50Ms: quantile(batched.latencies, 0.5),
    p99Ms: quantile(batched.latencies, 0.99),
    cpuMsPerMessage: batchCpuMs / batched.ok,
  };
  results.pgbench = { runs: pgbenchRuns };
  results.sendEmailVsPgbench = spread(sendRuns.map((s, i) => s.rps! / pgbenchRuns[i]!.best.tps));
} catch (err) {
  failures.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await cleanup();
}

// ---- report ----------------------------------------------------------------------------------------
// Each figure is the median of its runs, with the range (lowest–highest) beside it: one run on a shared
// machine says little, and a ratio without its spread says less.
type Spread = { median: number; min: number; max: number; runs: number[] };
type SvcRun = {
  msgPerSec: number;
  acceptedPerSec: number;
  roleCpuMsPerMessage: Record<string, number>;
  pgCpuMsPerMessage: number;
  loadGenCpuMsPerMessage: number;
  machineBusy: number;
};
type PostfixRun = { msgPerSec: number; cpuMsPerMessage: number; machineBusy: number };
const svcRuns = ((results.svc as { runs?: SvcRun[] } | undefined)?.runs ?? []) as SvcRun[];
const pfR = results.postfix as { version: string; runs: PostfixRun[] } | undefined;
const seRuns = ((results.sendEmail as { runs?: Record<string, number>[] } | undefined)?.runs ?? []) as Record<
  string,
  number
>[];
const sbR = results.sendBatch as
  { msgPerSec: number; clients: number; p50Ms: number; p99Ms: number; cpuMsPerMessage: number } | undefined;
const pgRuns =
  (results.pgbench as { runs?: { best: Record<string, number>; sweep: Record<string, number>[] }[] } | undefined)
    ?.runs ?? [];
// pgbench at sendEmail's concurrency, where the sweep has it: the peer's tail on the same statements and disk.
const pgAtC = pgRuns.map((r) => r.sweep.find((s) => s.clients === C)).filter((s) => s !== undefined);
const e2e = results.endToEnd as Spread | undefined;
const pfdR = results.postfixOpenDkim as { runs: PostfixRun[] } | undefined;
const e2eDkim = results.endToEndOpenDkim as Spread | undefined;
const db = results.sendEmailVsPgbench as Spread | undefined;
const sp = (s: Spread | undefined, d = 2, unit = '') => (s ? span(s, d, unit) : '—');
const summary = {
  date: new Date().toISOString(),
  machine: {
    cpus: os.cpus().length,
    // The cores this run may use (taskset): also each service process's worker count unless --workers says.
    cores: os.availableParallelism(),
    cpu: os.cpus()[0]?.model,
    node: process.version,
    loadAtStart,
    postgresCores,
  },
  args: {
    messages: N,
    concurrency: C,
    seconds: SECONDS,
    orgs: ORGS,
    warmup: WARMUP,
    postfixWarmup: PF_WARMUP,
    runs: RUNS,
    size: SIZE,
    body: args.body,
    domains: DOMAINS,
    workers: WORKERS ?? `default (${os.availableParallelism()} each)`,
  },
  ...results,
  failures,
};
const row = (label: string, rate: string, notes = '') => `  ${label.padEnd(58)}${rate.padStart(24)}   ${notes}`;
const seMed = (k: string) => median(seRuns.map((r) => r[k]!));
// The share of the machine's cores a side kept busy while it ran (bench/util.ts, machineCpu).
const busy = (runs: { machineBusy: number }[]) =>
  `machine ${fixed(median(runs.map((r) => r.machineBusy * 100)))}% busy`;
// The share of each run the service, Postgres's backends and the load generator waited for a core (docs/decisions.md
// #83), as the medians of the runs. Sets before the wait was kept have none: said only when every run has it (NaN
// where the kernel keeps no account).
const coreWaits = (runs: { svcCoreWait?: number; pgCoreWait?: number; loadGenCoreWait?: number }[]) => {
  const keys = ['svcCoreWait', 'pgCoreWait', 'loadGenCoreWait'] as const;
  if (!runs.length || !runs.every((r) => keys.every((k) => Number.isFinite(r[k])))) return '';
  const [svc, pg, loadGen] = keys.map((k) => fixed(median(runs.map((r) => r[k]! * 100))));
  return `; waited for a core: svc ${svc}%, Postgres ${pg}%, load generator ${loadGen}%`;
};
// The disk's longest stall in each run (watchDisk) and the WAL segments Postgres created (watchWal), as the medians
// of the runs.
const stalled = (runs: { diskStallMs?: number; walSegmentsCreated?: number }[]) =>
  (runs.length && runs.every((r) => Number.isFinite(r.diskStallMs))
    ? `; disk stalled up to ${fixed(median(runs.map((r) => r.diskStallMs!)))} ms`
    : '') +
  (runs.length && runs.every((r) => Number.isFinite(r.walSegmentsCreated))
    ? `; ${fixed(median(runs.map((r) => r.walSegmentsCreated!)))} WAL segments created`
    : '');
console.log(
  [
    '',
    `svc-mail bench: ${RUNS} runs of ${N} messages of ${SIZE} (${args.body}) to ${DOMAINS} domain(s), ` +
      `${C} in flight, ${ORGS} orgs; ${summary.machine.cores} of ${summary.machine.cpus} cores ` +
      `(${summary.machine.cpu}), SVC_WORKERS ${WORKERS ?? 'unset'} (${args['one-process'] ? 'all' : 'control,mta'}), ` +
      `load ${loadAtStart.toFixed(1)} at start` +
      (postgresCores === null ? '' : `, Postgres pinned to cores ${postgresCores}`),
    row('end to end (median of runs, range)', 'rate'),
    row(
      '  svc: sendEmail → MTA (DKIM) → smtp-sink',
      sp(svcRuns.length ? spread(svcRuns.map((r) => r.msgPerSec)) : undefined, 0, ' msg/s'),
      `accepted at ${fixed(median(svcRuns.map((r) => r.acceptedPerSec)))}/s; CPU/msg: svc ${Object.keys(
        svcRuns[0]?.roleCpuMsPerMessage ?? {},
      )
        .map((role) => `${fixed(median(svcRuns.map((r) => r.roleCpuMsPerMessage[role]!)), 2)} (${role})`)
        .join(' + ')} ms + Postgres ${fixed(median(svcRuns.map((r) => r.pgCpuMsPerMessage)), 2)} ms; ` +
        `load generator ${fixed(median(svcRuns.map((r) => r.loadGenCpuMsPerMessage)), 2)} ms; ` +
        busy(svcRuns),
    ),
    row(
      `  Postfix ${pfR?.version ?? ''}: smtp-source → Postfix → smtp-sink`,
      sp(pfR?.runs.length ? spread(pfR.runs.map((r) => r.msgPerSec)) : undefined, 0, ' msg/s'),
      `CPU/msg: Postfix ${fixed(median(pfR?.runs.map((r) => r.cpuMsPerMessage) ?? []), 2)} ms; ` +
        busy(pfR?.runs ?? []),
    ),
    row('  svc / Postfix', sp(e2e, 2, '×'), 'goal ≥ 2.0 at 1 KB, ≥ 1.5 at 100 KB'),
    ...(pfdR
      ? [
          row(
            '  Postfix + OpenDKIM milter (signs as we do) → smtp-sink',
            sp(spread(pfdR.runs.map((r) => r.msgPerSec)), 0, ' msg/s'),
            `CPU/msg: Postfix and opendkim ${fixed(median(pfdR.runs.map((r) => r.cpuMsPerMessage)), 2)} ms; ` +
              busy(pfdR.runs),
          ),
          row('  svc / Postfix + OpenDKIM', sp(e2eDkim, 2, '×')),
        ]
      : []),
    row('accepting (nothing delivers)', ''),
    row(
      `  sendEmail, ${C} clients`,
      sp(seRuns.length ? spread(seRuns.map((r) => r.rps!)) : undefined, 0, ' req/s'),
      `p50 ${fixed(seMed('p50Ms'), 1)} ms, p99 ${fixed(seMed('p99Ms'), 1)} ms (goal < 50); ` +
        `CPU/req: svc ${fixed(seMed('cpuMsPerRequest'), 2)} ms + ` +
        `Postgres ${fixed(seMed('pgCpuMsPerRequest'), 2)} ms; ` +
        `load generator ${fixed(seMed('loadGenCpuMsPerRequest'), 2)} ms; ` +
        busy(seRuns as { machineBusy: number }[]) +
        coreWaits(seRuns) +
        stalled(seRuns),
    ),
    row(
      `  sendBatch of ${BATCH}, ${sbR?.clients ?? '—'} clients (one run)`,
      `${fixed(sbR?.msgPerSec)} msg/s`,
      `${fixed(sbR && seMed('rps') ? sbR.msgPerSec / seMed('rps')! : undefined, 2)}× single sends; a batch: ` +
        `p50 ${fixed(sbR?.p50Ms, 1)} ms, p99 ${fixed(sbR?.p99Ms, 1)} ms; ` +
        `CPU/msg: svc ${fixed(sbR?.cpuMsPerMessage, 2)} ms`,
    ),
    row(
      `  pgbench bench/accept.sql at its best of -c ${PGBENCH_CLIENTS.join(',')}`,
      sp(pgRuns.length ? spread(pgRuns.map((r) => r.best.tps!)) : undefined, 0, ' tps'),
      `best at -c ${pgRuns.map((r) => r.best.clients).join(', ')}; ` +
        `p99 ${fixed(median(pgRuns.map((r) => r.best.p99Ms!)), 1)} ms; ` +
        `CPU/tx: Postgres ${fixed(median(pgRuns.map((r) => r.best.pgCpuMsPerTx!)), 2)} ms; ` +
        busy(pgRuns.map((r) => r.best as { machineBusy: number })),
    ),
    ...(pgAtC.length
      ? [
          row(
            `  pgbench at -c ${C}, sendEmail's clients`,
            sp(spread(pgAtC.map((s) => s.tps!)), 0, ' tps'),
            `p99 ${fixed(median(pgAtC.map((s) => s.p99Ms!)), 1)} ms${stalled(pgAtC)}`,
          ),
        ]
      : []),
    row('  sendEmail / pgbench at its best', sp(db, 2, '×'), 'goal ≥ 1.0'),
  ].join('\n'),
);
await mkdir(path.join(HERE, 'results'), { recursive: true });
await writeFile(path.join(HERE, 'results', path.basename(args.out!)), `${JSON.stringify(summary, null, 2)}\n`);
if (args['cpu-prof']) console.log(`  CPU profiles of the service processes (open in Chrome DevTools): ${profDir}`);
if (failures.length) {
  console.error(`\nFAILED:\n${failures.map((m) => `  ${m}`).join('\n')}`);
  process.exit(1);
}
process.exit(0);

// ---- helpers ---------------------------------------------------------------------------------------

/**
 * The service end to end: by default its control and mta roles as two processes on one spool and
 * database (architecture.md; config/svc@.service), so each role has a Node thread of its own, as
 * Postfix spreads its work over smtpd, cleanup, qmgr and smtp; with --one-process, `--role all`.
 */
async function startService(env: Record<string, string>, flags: string[]) {
  const roles: (Child & { role: string })[] = [];
  const stop = () => Promise.all(roles.map((r) => r.stop())).then(() => undefined);
  try {
    for (const role of args['one-process'] ? (['all'] as const) : (['control', 'mta'] as const)) {
      roles.push({ role, ...(await startChild(role, { ...env, ...workersOf(role) }, flags)) });
    }
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return { url: roles[0]!.url, roles, cpuSeconds: () => roles.reduce((sum, r) => sum + r.cpuSeconds(), 0), stop };
}

/** SVC_WORKERS of a role's process (WORKERS: N, or control,mta); none: the service's default. */
function workersOf(role: 'all' | 'control' | 'mta'): Record<string, string> {
  if (WORKERS === null) return {};
  const [control, mta = control] = WORKERS.split(',');
  return { SVC_WORKERS: role === 'mta' ? mta! : control! };
}

/** Every request of a load answered 200 (and there were `expected`, when given), or the run fails. */
function checked(what: string, r: LoadResult, expected = r.ok): void {
  if (r.ok !== expected || r.errors.size) {
    failures.push(`${what}: ${r.ok} of ${expected} accepted; errors: ${JSON.stringify(Object.fromEntries(r.errors))}`);
  }
}

/**
 * smtp-source sends every message to one recipient: over several domains, one smtp-source per domain, the
 * sessions and messages shared out among them.
 */
function smtpSource(relay: Relay, emlFile: string, fromDomain: string, count: number) {
  return Promise.all(
    Array.from({ length: DOMAINS }, (_, d) => {
      const share = Math.floor(count / DOMAINS) + (d < count % DOMAINS ? 1 : 0);
      const sessions = Math.max(1, Math.floor(C / DOMAINS) + (d < C % DOMAINS ? 1 : 0));
      if (!share) return Promise.resolve();
      return run('/usr/sbin/smtp-source', [
        ...['-s', String(sessions), '-m', String(share), '-d', '-N', '-F', emlFile],
        ...['-f', `no-reply@${fromDomain}`, '-t', `rcpt@${recipientDomain(d, DOMAINS)}`, `127.0.0.1:${relay.port}`],
      ]);
    }),
  );
}

/**
 * The sink holds exactly `expected` messages, each with a DKIM-Signature, and a sample of them verify
 * against the keys the tenants publish (each signature checked, not just present).
 */
async function checkSigned(name: string, sink: Sink, expected: number, keys: Record<string, string>): Promise<string> {
  const files = await sink.files();
  if (files.length !== expected) failures.push(`${name} sink holds ${files.length} messages, expected ${expected}`);
  let unsigned = 0;
  let verified = 0;
  for (const [i, file] of files.entries()) {
    // smtp-sink's dump: its own X-* lines and a three-line Received header, then the message, LF ends.
    const text = (await readFile(file, 'latin1')).replace(/^(?:X-[^\n]*\n)*Received:[^\n]*\n(?:[ \t][^\n]*\n)*/, '');
    if (!/^DKIM-Signature:/im.test(text)) unsigned++;
    else if (i % 100 === 0) {
      const { results: r } = await dkimVerify(Buffer.from(text.replace(/\n/g, '\r\n'), 'latin1'), {
        resolver: async (name, type) => {
          const v = type === 'TXT' ? keys[name] : undefined;
          if (!v) throw Object.assign(new Error('not found'), { code: 'ENOTFOUND' });
          return [[v]];
        },
      });
      if (r.length && r.every((s) => s.status.result === 'pass')) verified++;
      else
        failures.push(`DKIM of ${path.basename(file)}: ${r.map((s) => s.status.result).join(', ') || 'no signature'}`);
    }
  }
  if (unsigned) failures.push(`${unsigned} messages at the ${name} sink have no DKIM-Signature`);
  return `${files.length - unsigned} of ${files.length} signed, ${verified} sampled signatures verified`;
}

/**
 * A measurement's storage watch (watchStorage) as the results record it: the disk's longest stall and how many passed
 * 50 ms, and the WAL segments Postgres created. A stall holds up every commit in flight, and so does a segment's
 * creation, so a p99 over the goal in a run with long stalls or many creations says more of the host than of the code.
 */
function storageOf(
  dataDir: string,
  walDir: string | null,
): () => { diskStallMs: number; diskStallsOver50: number; walSegmentsCreated: number } {
  const stop = watchStorage(dataDir, walDir);
  return () => {
    // NaN (null in the results' JSON) where the disk or pg_wal is not watched.
    const { disk, walSegmentsCreated } = stop();
    return {
      diskStallMs: disk?.longestMs ?? NaN,
      diskStallsOver50: disk?.over50 ?? NaN,
      walSegmentsCreated: walSegmentsCreated ?? NaN,
    };
  };
}

/** pgbench on accept.sql; latencies from its per-transaction log. */
async function pgbench(url: string, tenants: number, clients: number, seconds: number) {
  const logDir = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-pgbench-'));
  try {
    const { stdout } = await run(
      'pgbench',
      [
        '-n',
        '-c',
        String(clients),
        '-j',
        '2',
        '-T',
        String(seconds),
        '-M',
        'prepared',
        '-D',
        `tenants=${tenants}`,
        '-f',
        path.join(HERE, 'accept.sql'),
        '-l',
        '--log-prefix',
        path.join(logDir, 'tx'),
        url,
      ],
      { maxBuffer: 1 << 24 },
    );
    const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(stdout)?.[1]);
    const failed = Number(/number of failed transactions: (\d+)/.exec(stdout)?.[1] ?? 0);
    if (!Number.isFinite(tps) || failed) failures.push(`pgbench: ${failed} failed transactions\n${stdout}`);
    // One line per transaction: client_id transaction_no time(µs) script_no time_epoch time_us.
    const latencies: number[] = [];
    for (const file of await readdir(logDir)) {
      for (const line of (await readFile(path.join(logDir, file), 'utf8')).split('\n')) {
        const us = Number(line.split(' ')[2]);
        if (line && Number.isFinite(us)) latencies.push(us / 1000);
      }
    }
    const sorted = Float64Array.from(latencies).sort();
    return { tps, transactions: sorted.length, p50Ms: quantile(sorted, 0.5), p99Ms: quantile(sorted, 0.99) };
  } finally {
    await rm(logDir, { recursive: true, force: true });
  }
}
