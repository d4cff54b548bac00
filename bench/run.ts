// `npm run bench`: throughput of the platform beside Debian's Postfix and beside pgbench, in one run on
// one machine (issue 5). Sequential phases, so they never compete for the cores:
//
//   1. end to end: N sendEmail requests (SDK, signed, 64 in flight) to the service (its control and
//      mta roles as two child processes on one spool, or with --one-process one `--role all`) → its
//      MTA, DKIM signing, delivering through a loopback DNS zone's MX → smtp-sink. From the first
//      request to the N-th message counted by the sink.
//   2. Postfix: smtp-source (64 sessions) → a private Postfix relaying to an identical smtp-sink, the
//      same N messages (same size, one recipient each). From smtp-source's start to the N-th message.
//   3. sendEmail alone (the service with --role control: nothing delivers) for --seconds at 64
//      clients, then sendBatch (100 messages a request, 8 clients) for as long, beside pgbench running
//      bench/accept.sql, the same work per send, on the same Postgres.
//
// Both end-to-end sides first send --warmup messages that are not timed: a service runs for days, and
// a process that V8 has not yet compiled is not what we measure (at 100 the service was ~35% slower).
// Needs root (postfix start), Debian's postfix (smtp-source, smtp-sink), pgbench, and a PostgreSQL
// server (--pg, default postgres://postgres@127.0.0.1:5432/postgres) where it creates a database of its
// own and drops it at the end.
//
//   node --import tsx bench/run.ts [--messages 10000] [--concurrency 64] [--seconds 10] [--orgs 8]
//                                   [--warmup 2000] [--pg URL] [--one-process] [--cpu-prof]
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { startDnsZone } from '../test/helpers/dns-zone.js';
import { composeMessage } from '../mail/compose.js';
import { startSink, type Sink } from './sink.js';
import { startRelay } from './postfix.js';
import {
  createTenants,
  KEYS_PER_CLIENT,
  sendLoad,
  startChild,
  type Child,
  SUBJECT,
  TEXT,
  type LoadResult,
  type Tenant,
} from './service.js';
import { benchDatabase, cpuSecondsOf, quantile, sleep } from './util.js';

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
    warmup: { type: 'string', default: '2000' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
    'cpu-prof': { type: 'boolean', default: false },
    'one-process': { type: 'boolean', default: false },
  },
});
const N = Number(args.messages);
const C = Number(args.concurrency);
const SECONDS = Math.max(3, Number(args.seconds));
const ORGS = Number(args.orgs);
const WARMUP = Number(args.warmup);
const BATCH = 100;
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
try {
  // ---- shared setup: a database, a data dir, a DNS zone with the recipients' MX -------------------
  const created = await benchDatabase(args.pg, 'svc_bench', cleanups);
  const dbName = created.dbName;
  results.postgres = created.version;
  const dbUrl = new URL(created.url);

  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-data-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const zone = await startDnsZone();
  cleanups.push(() => zone.stop());
  zone.mx('dest.test', 10, 'mx.dest.test').a('mx.dest.test', '127.0.0.1');
  const nodeFlags = args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [];
  const env = {
    SVC_DATABASE_URL: dbUrl.toString(),
    SVC_DATA_DIR: dataDir,
    SVC_DNS_SERVERS: zone.hostPort,
    // One master key for both service processes: the API keys' secrets are sealed with it.
    SVC_MASTER_KEY: randomBytes(32).toString('base64'),
    // The machine's throughput is measured, not the per-credential limit (SVC_RATE_LIMIT_*, issue 18 item 3).
    SVC_RATE_LIMIT_BURST: '1000000',
    SVC_RATE_LIMIT_PER_SECOND: '100000',
  };

  // ---- 1. end to end through the service ---------------------------------------------------------
  const ourSink = await startSink('svc');
  cleanups.push(() => ourSink.stop());
  const svc = await startService({ ...env, SVC_OUTBOUND_PORT: String(ourSink.port) }, nodeFlags);
  cleanups.push(() => svc.stop());
  const tenants = await createTenants(svc.url, ORGS, KEYS_PER_CLIENT * Math.ceil(C / ORGS));
  for (const t of tenants) for (const [host, value] of Object.entries(t.dkimTxt)) zone.txt(host, value);

  checked('svc warm-up', await sendLoad(svc.url, tenants, { concurrency: C, count: WARMUP }), WARMUP);
  await ourSink.reached(WARMUP, DRAIN_MS);
  // Postgres backends serving the bench database: "postgres: <user> <db> <client> <state>".
  const pgCpu = () => cpuSecondsOf((p) => p.cmdline.startsWith('postgres: ') && p.cmdline.includes(` ${dbName} `));
  const cpu0 = svc.cpuSeconds();
  const roleCpu0 = svc.roles.map((r) => r.cpuSeconds());
  const pgCpu0 = pgCpu();
  const benchCpu0 = process.cpuUsage();
  const e2e = await sendLoad(svc.url, tenants, { concurrency: C, count: N, firstIndex: WARMUP });
  const ourEnd = await ourSink.reached(WARMUP + N, DRAIN_MS).catch((err: Error) => (failures.push(err.message), NaN));
  const cpuMsPerMessage = ((svc.cpuSeconds() - cpu0) * 1000) / N;
  const roleCpuMsPerMessage = Object.fromEntries(
    svc.roles.map((r, i) => [r.role, ((r.cpuSeconds() - roleCpu0[i]!) * 1000) / N]),
  );
  const pgCpuMsPerMessage = ((pgCpu() - pgCpu0) * 1000) / N;
  // The load generator shares the cores (smtp-source does too, for Postfix): what it cost us.
  const benchCpu = process.cpuUsage(benchCpu0);
  const loadGenCpuMsPerMessage = (benchCpu.user + benchCpu.system) / 1000 / N;
  checked('svc end to end', e2e, N);
  await svc.stop();
  const dkim = await checkDelivered(ourSink, WARMUP + N, tenants);
  const ours = {
    processes: svc.roles.map((r) => r.role),
    seconds: (ourEnd - e2e.startMs) / 1000,
    acceptSeconds: (e2e.endMs - e2e.startMs) / 1000,
    cpuMsPerMessage,
    roleCpuMsPerMessage,
    pgCpuMsPerMessage,
    loadGenCpuMsPerMessage,
    dkim,
  };
  results.svc = { ...ours, msgPerSec: N / ours.seconds, acceptedPerSec: N / ours.acceptSeconds };

  // ---- 2. the same through Postfix ---------------------------------------------------------------
  const pfSink = await startSink('postfix');
  cleanups.push(() => pfSink.stop());
  // in_flow_delay 0: with the default (1 s), smtpd holds back each message whenever the queue
  // manager lags, which here halved Postfix's throughput; we compare with the faster setting.
  const relay = await startRelay(pfSink.port, { in_flow_delay: '0' });
  cleanups.push(() => relay.stop());
  // The same message our service composes (without its DKIM signatures), as smtp-source -F sends a file.
  const t = tenants[0]!;
  const eml = await composeMessage({
    from: { name: 'Bench', address: `no-reply@${t.domain}` },
    to: 'rcpt@dest.test',
    subject: `${SUBJECT} 1234`,
    text: TEXT,
    messageId: `${randomBytes(16).toString('hex')}@${t.domain}`,
    date: new Date(),
  });
  const emlFile = path.join(relay.dir, 'message.eml');
  await writeFile(emlFile, eml.toString('latin1').replace(/\r\n/g, '\n')); // -F appends CRLF to each line
  const source = (count: number) =>
    run('/usr/sbin/smtp-source', [
      '-s',
      String(C),
      '-m',
      String(count),
      '-d',
      '-N',
      '-F',
      emlFile,
      '-f',
      `no-reply@${t.domain}`,
      '-t',
      'rcpt@dest.test',
      `127.0.0.1:${relay.port}`,
    ]);
  await source(WARMUP);
  await pfSink.reached(WARMUP, DRAIN_MS);
  const pfCpu0 = relay.cpuSeconds();
  const pfStart = performance.now();
  await source(N).catch((err: { stderr?: string }) => failures.push(`smtp-source: ${err.stderr ?? err}`));
  const pfEnd = await pfSink.reached(WARMUP + N, DRAIN_MS).catch(async (err: Error) => {
    failures.push(`${err.message}\n${(await relay.log()).split('\n').slice(-10).join('\n')}`);
    return NaN;
  });
  const pfCpuMsPerMessage = ((relay.cpuSeconds() - pfCpu0) * 1000) / N;
  const pfCount = (await pfSink.files()).length;
  if (pfCount !== WARMUP + N) failures.push(`postfix sink holds ${pfCount} messages, expected ${WARMUP + N}`);
  results.postfix = {
    version: relay.version,
    seconds: (pfEnd - pfStart) / 1000,
    msgPerSec: N / ((pfEnd - pfStart) / 1000),
    cpuMsPerMessage: pfCpuMsPerMessage,
  };
  await relay.stop();

  // ---- 3. sendEmail alone, then pgbench with the same statements ---------------------------------
  const ctl = await startChild('control', env, nodeFlags);
  cleanups.push(() => ctl.stop());
  checked(
    'control warm-up',
    await sendLoad(ctl.url, tenants, { concurrency: C, count: WARMUP * 2, firstIndex: 1e6 }),
    WARMUP * 2,
  );
  const ctlCpu0 = ctl.cpuSeconds();
  const ctlPgCpu0 = pgCpu();
  const alone = await sendLoad(ctl.url, tenants, {
    concurrency: C,
    untilMs: performance.now() + SECONDS * 1000,
    firstIndex: 2e6,
  });
  const cpuMsPerRequest = ((ctl.cpuSeconds() - ctlCpu0) * 1000) / alone.ok;
  const pgCpuMsPerRequest = ((pgCpu() - ctlPgCpu0) * 1000) / alone.ok;
  checked('sendEmail alone', alone);
  await ctl.stop();
  results.sendEmail = {
    rps: alone.ok / ((alone.endMs - alone.startMs) / 1000),
    requests: alone.ok,
    p50Ms: quantile(alone.latencies, 0.5),
    p99Ms: quantile(alone.latencies, 0.99),
    cpuMsPerRequest,
    pgCpuMsPerRequest,
  };
  // sendBatch (issue 16 item 7): the same messages, 100 a request, from 8 clients (a batch is already
  // many sends in flight); messages per second beside single sends'.
  const ctlBatch = await startChild('control', env, nodeFlags);
  cleanups.push(() => ctlBatch.stop());
  const batchC = Math.min(8, C);
  checked(
    'sendBatch warm-up',
    await sendLoad(ctlBatch.url, tenants, { concurrency: batchC, count: WARMUP, firstIndex: 3e6, batch: BATCH }),
  );
  const batchCpu0 = ctlBatch.cpuSeconds();
  const batched = await sendLoad(ctlBatch.url, tenants, {
    concurrency: batchC,
    untilMs: performance.now() + SECONDS * 1000,
    firstIndex: 4e6,
    batch: BATCH,
  });
  checked('sendBatch alone', batched);
  const batchCpuMs = (ctlBatch.cpuSeconds() - batchCpu0) * 1000;
  await ctlBatch.stop();
  results.sendBatch = {
    batch: BATCH,
    clients: batchC,
    msgPerSec: batched.ok / ((batched.endMs - batched.startMs) / 1000),
    messages: batched.ok,
    p50Ms: quantile(batched.latencies, 0.5),
    p99Ms: quantile(batched.latencies, 0.99),
    cpuMsPerMessage: batchCpuMs / batched.ok,
  };

  // pgbench's backends are gone when it returns (and their CPU time with them): sample while it runs.
  const running = pgbench(dbUrl.toString(), ORGS, C, SECONDS);
  await sleep(1_000);
  const [c1, w1] = [pgCpu(), performance.now()];
  await sleep((SECONDS - 2) * 1_000);
  const [c2, w2] = [pgCpu(), performance.now()];
  const pgb = await running;
  results.pgbench = { ...pgb, pgCpuMsPerTx: ((c2 - c1) / ((w2 - w1) / 1000) / pgb.tps) * 1000 };
} catch (err) {
  failures.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await cleanup();
}

// ---- report ----------------------------------------------------------------------------------------
type Rate = { msgPerSec: number; seconds: number };
const svcR = results.svc as
  | (Rate & {
      acceptedPerSec: number;
      cpuMsPerMessage: number;
      roleCpuMsPerMessage: Record<string, number>;
      pgCpuMsPerMessage: number;
      loadGenCpuMsPerMessage: number;
    })
  | undefined;
const pfR = results.postfix as (Rate & { version: string; cpuMsPerMessage: number }) | undefined;
const seR = results.sendEmail as
  { rps: number; p50Ms: number; p99Ms: number; cpuMsPerRequest: number; pgCpuMsPerRequest: number } | undefined;
const sbR = results.sendBatch as
  { msgPerSec: number; clients: number; p50Ms: number; p99Ms: number; cpuMsPerMessage: number } | undefined;
const pgR = results.pgbench as { tps: number; p50Ms: number; p99Ms: number; pgCpuMsPerTx: number } | undefined;
const f = (n: number | undefined, d = 0) => (n === undefined || !Number.isFinite(n) ? '—' : n.toFixed(d));
const ratio = (a?: number, b?: number) => (a && b ? a / b : undefined);
const e2eRatio = ratio(svcR?.msgPerSec, pfR?.msgPerSec);
const dbRatio = ratio(seR?.rps, pgR?.tps);
const summary = {
  date: new Date().toISOString(),
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, loadAtStart },
  args: { messages: N, concurrency: C, seconds: SECONDS, orgs: ORGS, warmup: WARMUP },
  ...results,
  ratios: { endToEnd: e2eRatio, sendEmailVsPgbench: dbRatio },
  failures,
};
const row = (label: string, rate: string, time: string, notes = '') =>
  `  ${label.padEnd(58)}${rate.padStart(13)}${time.padStart(9)}   ${notes}`;
console.log(
  [
    '',
    `svc-mail bench: ${N} messages, ${C} in flight, ${ORGS} orgs; ` +
      `${summary.machine.cpus} cores (${summary.machine.cpu}), load ${loadAtStart.toFixed(1)} at start`,
    row('end to end', 'rate', 'time'),
    row(
      '  svc: sendEmail → MTA (DKIM) → smtp-sink',
      `${f(svcR?.msgPerSec)} msg/s`,
      `${f(svcR?.seconds, 1)} s`,
      `accepted at ${f(svcR?.acceptedPerSec)}/s; CPU/msg: svc ${Object.entries(svcR?.roleCpuMsPerMessage ?? {})
        .map(([r, ms]) => `${f(ms, 2)} (${r})`)
        .join(
          ' + ',
        )} ms + Postgres ${f(svcR?.pgCpuMsPerMessage, 2)} ms; load generator ${f(svcR?.loadGenCpuMsPerMessage, 2)} ms`,
    ),
    row(
      `  Postfix ${pfR?.version ?? ''}: smtp-source → Postfix → smtp-sink`,
      `${f(pfR?.msgPerSec)} msg/s`,
      `${f(pfR?.seconds, 1)} s`,
      `CPU/msg: Postfix ${f(pfR?.cpuMsPerMessage, 1)} ms`,
    ),
    row('  svc / Postfix', `${f(e2eRatio, 2)}×`, '', 'goal ≥ 2.0'),
    row('accepting (nothing delivers)', '', ''),
    row(
      `  sendEmail, ${C} clients`,
      `${f(seR?.rps)} req/s`,
      `${SECONDS} s`,
      `p50 ${f(seR?.p50Ms, 1)} ms, p99 ${f(seR?.p99Ms, 1)} ms; ` +
        `CPU/req: svc ${f(seR?.cpuMsPerRequest, 1)} ms + Postgres ${f(seR?.pgCpuMsPerRequest, 1)} ms`,
    ),
    row(
      `  sendBatch of ${BATCH}, ${sbR?.clients ?? '—'} clients`,
      `${f(sbR?.msgPerSec)} msg/s`,
      `${SECONDS} s`,
      `${f(ratio(sbR?.msgPerSec, seR?.rps), 2)}× single sends; a batch: p50 ${f(sbR?.p50Ms, 1)} ms, ` +
        `p99 ${f(sbR?.p99Ms, 1)} ms; CPU/msg: svc ${f(sbR?.cpuMsPerMessage, 2)} ms`,
    ),
    row(
      `  pgbench bench/accept.sql -c ${C} -j 2 -M prepared`,
      `${f(pgR?.tps)} tps`,
      `${SECONDS} s`,
      `p50 ${f(pgR?.p50Ms, 1)} ms, p99 ${f(pgR?.p99Ms, 1)} ms; CPU/tx: Postgres ${f(pgR?.pgCpuMsPerTx, 1)} ms`,
    ),
    row('  sendEmail / pgbench', `${f(dbRatio, 2)}×`, '', 'goal ≥ 0.8'),
  ].join('\n'),
);
await mkdir(path.join(HERE, 'results'), { recursive: true });
await writeFile(path.join(HERE, 'results', 'latest.json'), `${JSON.stringify(summary, null, 2)}\n`);
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
      roles.push({ role, ...(await startChild(role, env, flags)) });
    }
  } catch (err) {
    await stop().catch(() => {});
    throw err;
  }
  return { url: roles[0]!.url, roles, cpuSeconds: () => roles.reduce((sum, r) => sum + r.cpuSeconds(), 0), stop };
}

/** Every request of a load answered 200 (and there were `expected`, when given), or the run fails. */
function checked(what: string, r: LoadResult, expected = r.ok): void {
  if (r.ok !== expected || r.errors.size) {
    failures.push(`${what}: ${r.ok} of ${expected} accepted; errors: ${JSON.stringify(Object.fromEntries(r.errors))}`);
  }
}

/**
 * The sink holds exactly `expected` messages, each with a DKIM-Signature, and a sample of them verify
 * against the keys the tenants publish (each signature checked, not just present).
 */
async function checkDelivered(sink: Sink, expected: number, tenants: Tenant[]): Promise<string> {
  const files = await sink.files();
  if (files.length !== expected) failures.push(`svc sink holds ${files.length} messages, expected ${expected}`);
  const keys = Object.assign({}, ...tenants.map((t) => t.dkimTxt)) as Record<string, string>;
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
  if (unsigned) failures.push(`${unsigned} messages at the svc sink have no DKIM-Signature`);
  return `${files.length - unsigned} of ${files.length} signed, ${verified} sampled signatures verified`;
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
