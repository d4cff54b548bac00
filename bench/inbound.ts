// `npm run bench:inbound`: inbound mail accepted and stored per second, the service's MX beside Debian's
// Postfix, in one run on one machine (issue 12). For each message size (--sizes, default 1 KB and 100 KB)
// and each of --runs runs, the same smtp-source stream (`-s 32 -d -l <bytes>`, one recipient) goes to:
//
//   a. the service (`svc start --role all`, a Postgres database of its own, the local blob store on
//      LMDB): its MX listener writes the 250 only once the body is synced and the row committed
//      (mta/inbound/deliver.ts). Timed from smtp-source's start to the N-th row in mail_messages.
//   b. a private Postfix (bench/postfix.ts startMaildir) delivering the domain to a Maildir with
//      virtual(8): smtpd's 250 comes after cleanup fsyncs the queue file, and virtual fsyncs the Maildir
//      file before it appears in new/. Timed from smtp-source's start to the N-th file in new/.
//
// The two sides take turns (the first side alternates from run to run), so drift in what else loads the
// machine falls on both. Both first receive --warmup untimed messages of each size (a service runs for
// days; V8 compiles its hot paths in the first few hundred). Needs root (postfix start), Debian's postfix
// (smtp-source) and a PostgreSQL server (--pg, default postgres://postgres@127.0.0.1:5432/postgres) where
// it creates a database of its own and drops it at the end. Writes bench/results/inbound-latest.json.
//
//   node --import ./bin/resolve-sources.ts bench/inbound.ts [--sizes 1024,102400] [--messages 5000,1000]
//        [--sessions 32] [--runs 3] [--warmup 500] [--pg URL] [--cpu-prof]
import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import pg from 'pg';
import { createClient } from '@svc-mail/sdk';
import { openPostgres } from '../storage/pg/client.js';
import { markInboundVerified } from '../storage/pg/domains.js';
import { createInbox } from '../storage/pg/inboxes.js';
import { startMaildir } from './postfix.js';
import { ADMIN_KEY, benchSetup, startChild } from './service.js';
import {
  benchDatabase,
  cpuSecondsSince,
  fixed,
  freePort,
  isBackendOf,
  medianRange,
  PG_URL,
  processes,
  sleep,
  span,
} from './util.js';

const run = promisify(execFile);
const HERE = path.dirname(fileURLToPath(import.meta.url));

const { values: args } = parseArgs({
  options: {
    sizes: { type: 'string', default: '1024,102400' },
    messages: { type: 'string', default: '5000,1000' },
    sessions: { type: 'string', default: '32' },
    runs: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '500' },
    pg: { type: 'string', default: PG_URL },
    'cpu-prof': { type: 'boolean', default: false },
  },
});
const SIZES = args.sizes.split(',').map(parseSize);
const COUNTS = args.messages.split(',').map(Number);
const countFor = (i: number) => COUNTS[Math.min(i, COUNTS.length - 1)]!;
const SESSIONS = Number(args.sessions);
const RUNS = Math.max(1, Number(args.runs));
const WARMUP = Number(args.warmup);
const DOMAIN = 'inbound-bench.test';
const RCPT = `inbox@${DOMAIN}`;
const SENDER = 'bench@sender-bench.test';
// The N-th message must be stored this long after smtp-source returns, or the run fails.
const DRAIN_MS = 120_000;

for (const tool of ['/usr/sbin/postfix', '/usr/sbin/smtp-source']) accessSync(tool, constants.X_OK);

const failures: string[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
const cleanup = async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch((err) => console.error(`cleanup: ${err}`));
};
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => void cleanup().finally(() => process.exit(130)));

interface Side {
  seconds: number;
  msgPerSec: number;
  /** CPU ms per message of each process group of the side, and of smtp-source. */
  cpuMsPerMessage: Record<string, number>;
}
interface Trial {
  run: number;
  first: 'svc' | 'postfix';
  svc?: Side;
  postfix?: Side;
  ratio?: number;
}
const bySize: { bytes: number; messages: number; trials: Trial[] }[] = SIZES.map((bytes, i) => ({
  bytes,
  messages: countFor(i),
  trials: [],
}));
let postgresVersion = '';
let postfixVersion = '';
const profDir = path.join(os.tmpdir(), `svc-bench-prof-${Date.now().toString(36)}`);
const loadAtStart = os.loadavg()[0]!;

try {
  // ---- a database, a data dir, a DNS zone that publishes the sender's SPF -------------------------
  const created = await benchDatabase(args.pg, 'svc_inbench', cleanups);
  const dbName = created.dbName;
  postgresVersion = created.version;
  const dbUrl = new URL(created.url);

  // The MX authenticates every message (SPF, DKIM, DMARC: mta/inbound/authenticate.ts); its lookups are
  // answered on loopback. Postfix, as configured by Debian, checks none of these.
  const { dataDir, zone } = await benchSetup('inbench', cleanups);
  zone.txt('sender-bench.test', 'v=spf1 ip4:127.0.0.1 -all');
  zone.txt('_dmarc.sender-bench.test', 'v=DMARC1; p=none');

  // ---- the service, one process (every role), its MX on a port of ours ----------------------------
  const smtpPort = await freePort();
  const svc = await startChild(
    'all',
    {
      SVC_DATABASE_URL: dbUrl.toString(),
      SVC_DATA_DIR: dataDir,
      SVC_DNS_SERVERS: zone.hostPort,
      SVC_MASTER_KEY: randomBytes(32).toString('base64'),
      SVC_BLOB_STORE: 'local',
      SVC_SMTP_PORT: String(smtpPort),
      // smtp-source opens all its sessions from 127.0.0.1 (the default allows 20 from one address);
      // Postfix exempts $mynetworks from its per-client limits (smtpd_client_event_limit_exceptions).
      SVC_MX_MAX_CONNECTIONS_PER_IP: String(SESSIONS * 2),
    },
    args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [],
  );
  cleanups.push(() => svc.stop());
  const db = openPostgres(dbUrl.toString(), 2);
  cleanups.push(() => db.close());
  const inbox = await makeInbox(svc.url, db);
  // The bench's own polling backend is not the service's work.
  const poller = new pg.Client({ connectionString: dbUrl.toString() });
  await poller.connect();
  cleanups.push(() => poller.end());
  const pollerPid = (await poller.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
  const stored = async () =>
    Number(
      (
        await poller.query<{ n: string }>('SELECT count(*) AS n FROM mail_messages WHERE mailbox_id = $1', [
          inbox.mailboxId,
        ])
      ).rows[0]!.n,
    );
  // Backend by backend (cpuSecondsSince): one that ends during a stream takes only its own time with it.
  const isBackend = isBackendOf(dbName);
  const pgCpuSince = () => cpuSecondsSince((p) => isBackend(p) && p.pid !== pollerPid);

  // ---- Postfix ------------------------------------------------------------------------------------
  // in_flow_delay 0, as bench/run.ts: the default 1 s makes smtpd wait whenever qmgr lags.
  const pf = await startMaildir(DOMAIN, ['inbox'], { in_flow_delay: '0' });
  cleanups.push(() => pf.stop());
  postfixVersion = pf.version;

  // smtp-source is our child: its CPU lands in our reaped-children time (cutime, cstime) when it exits.
  const sourceCpu = () => processes().find((p) => p.pid === process.pid)!.reapedCpu;
  const source = (port: number, count: number, bytes: number) =>
    run(
      '/usr/sbin/smtp-source',
      ['-s', String(SESSIONS), '-m', String(count), '-d', '-l', String(bytes)].concat([
        '-f',
        SENDER,
        '-t',
        RCPT,
        `127.0.0.1:${port}`,
      ]),
      { maxBuffer: 1 << 24 },
    );

  // Each side's CPU counters, each started at a stream's start and read at its end (the seconds since).
  const since = (read: () => number) => {
    const start = read();
    return () => read() - start;
  };
  const sides = {
    svc: {
      port: smtpPort,
      count: stored,
      cpu: { svc: () => since(svc.cpuSeconds), postgres: pgCpuSince, 'smtp-source': () => since(sourceCpu) },
    },
    postfix: {
      port: pf.port,
      count: pf.delivered,
      cpu: { postfix: () => since(pf.cpuSeconds), 'smtp-source': () => since(sourceCpu) },
    },
  };

  /** One stream of `n` messages into a side; from smtp-source's start to the n-th message stored. */
  const measure = async (name: keyof typeof sides, n: number, bytes: number): Promise<Side> => {
    const side = sides[name];
    const base = await side.count();
    const cpu = Object.entries(side.cpu).map(([k, start]) => [k, start()] as const);
    const t0 = performance.now();
    await source(side.port, n, bytes).catch((err: { stderr?: string }) => {
      throw new Error(`smtp-source → ${name}: ${err.stderr ?? err}`);
    });
    // Our 250 follows the commit, so the rows are there; Postfix's queue is still delivering.
    const deadline = performance.now() + DRAIN_MS;
    let have = await side.count();
    while (have < base + n) {
      if (performance.now() > deadline) throw new Error(`${name}: ${have - base} of ${n} messages stored`);
      await sleep(5);
      have = await side.count();
    }
    const seconds = (performance.now() - t0) / 1000;
    if (have !== base + n) throw new Error(`${name}: ${have - base} messages stored, ${n} sent`);
    return {
      seconds,
      msgPerSec: n / seconds,
      cpuMsPerMessage: Object.fromEntries(cpu.map(([k, used]) => [k, (used() * 1000) / n])),
    };
  };

  for (const s of bySize) {
    const w = Math.min(WARMUP, s.messages);
    if (w > 0) for (const name of ['svc', 'postfix'] as const) await measure(name, w, s.bytes);
  }
  for (let r = 1; r <= RUNS; r++) {
    for (const s of bySize) {
      const order = r % 2 ? (['svc', 'postfix'] as const) : (['postfix', 'svc'] as const);
      const trial: Trial = { run: r, first: order[0] };
      for (const name of order) {
        try {
          trial[name] = await measure(name, s.messages, s.bytes);
        } catch (err) {
          failures.push(`run ${r}, ${s.bytes} bytes: ${(err as Error).message}`);
        }
      }
      if (trial.svc && trial.postfix) trial.ratio = trial.svc.msgPerSec / trial.postfix.msgPerSec;
      s.trials.push(trial);
      console.log(
        `run ${r}, ${s.bytes} B × ${s.messages}: svc ${fixed(trial.svc?.msgPerSec)} msg/s, ` +
          `Postfix ${fixed(trial.postfix?.msgPerSec)} msg/s, ratio ${fixed(trial.ratio, 2)}`,
      );
    }
  }
  // What was stored is what was sent: a body of the right size behind the last row.
  const last = (
    await poller.query<{ size: string }>(
      'SELECT size FROM mail_messages WHERE mailbox_id = $1 ORDER BY uid DESC LIMIT 1',
      [inbox.mailboxId],
    )
  ).rows[0];
  const lastBytes = SIZES[SIZES.length - 1]!;
  if (!last || Number(last.size) < lastBytes)
    failures.push(`the last stored message is ${last?.size ?? 'missing'} bytes, sent ${lastBytes} of payload`);
} catch (err) {
  failures.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await cleanup();
}

// ---- report ----------------------------------------------------------------------------------------
function parseSize(s: string): number {
  const m = /^(\d+)\s*([kKmM]?)[bB]?$/.exec(s.trim());
  if (!m) throw new Error(`--sizes: bad size ${JSON.stringify(s)}`);
  return Number(m[1]) * (m[2] ? (m[2].toLowerCase() === 'k' ? 1024 : 1024 * 1024) : 1);
}

const sizes = bySize.map((s) => {
  const of = (name: 'svc' | 'postfix') => s.trials.map((t) => t[name]).filter((x): x is Side => !!x);
  const cpu = (sides: Side[]) =>
    Object.fromEntries(
      Object.keys(sides[0]?.cpuMsPerMessage ?? {}).map((k) => [
        k,
        medianRange(sides.map((x) => x.cpuMsPerMessage[k]!)),
      ]),
    );
  return {
    bytes: s.bytes,
    messages: s.messages,
    svc: { msgPerSec: medianRange(of('svc').map((x) => x.msgPerSec)), cpuMsPerMessage: cpu(of('svc')) },
    postfix: { msgPerSec: medianRange(of('postfix').map((x) => x.msgPerSec)), cpuMsPerMessage: cpu(of('postfix')) },
    ratio: medianRange(s.trials.map((t) => t.ratio).filter((x): x is number => x !== undefined)),
    trials: s.trials,
  };
});
const summary = {
  date: new Date().toISOString(),
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, loadAtStart },
  postgres: postgresVersion,
  postfix: postfixVersion,
  args: { sizes: SIZES, messages: bySize.map((s) => s.messages), sessions: SESSIONS, runs: RUNS, warmup: WARMUP },
  command: `smtp-source -s ${SESSIONS} -m <N> -d -l <bytes> -f ${SENDER} -t ${RCPT} 127.0.0.1:<port>`,
  sizes,
  failures,
};
const cpuText = (c: Record<string, { median: number }>) =>
  Object.entries(c)
    .map(([k, v]) => `${k} ${fixed(v.median, 2)}`)
    .join(' + ');
console.log(
  [
    '',
    `svc-mail inbound bench: ${RUNS} runs, smtp-source -s ${SESSIONS} -d; ` +
      `${summary.machine.cpus} cores (${summary.machine.cpu}), load ${loadAtStart.toFixed(1)} at start; ` +
      `Postfix ${postfixVersion}, PostgreSQL ${postgresVersion}`,
    '  median (min–max) of the runs',
    ...sizes.flatMap((s) => [
      `  ${s.bytes} bytes × ${s.messages}`,
      `    svc MX → Postgres + LMDB   ${span(s.svc.msgPerSec).padStart(20)} msg/s   CPU ms/msg: ` +
        cpuText(s.svc.cpuMsPerMessage),
      `    Postfix → virtual Maildir  ${span(s.postfix.msgPerSec).padStart(20)} msg/s   CPU ms/msg: ` +
        cpuText(s.postfix.cpuMsPerMessage),
      `    svc / Postfix              ${span(s.ratio, 2).padStart(20)} ×       goal ≥ 1.0`,
    ]),
  ].join('\n'),
);
await mkdir(path.join(HERE, 'results'), { recursive: true });
await writeFile(path.join(HERE, 'results', 'inbound-latest.json'), `${JSON.stringify(summary, null, 2)}\n`);
if (args['cpu-prof']) console.log(`  CPU profiles of the service process (open in Chrome DevTools): ${profDir}`);
if (failures.length) {
  console.error(`\nFAILED:\n${failures.map((m) => `  ${m}`).join('\n')}`);
  process.exit(1);
}
process.exit(0);

// ---- setup -----------------------------------------------------------------------------------------

/**
 * A payg organization whose project claims DOMAIN (verified by the platform key) with an inbound
 * capability, marked verified in storage (no DNS), and one inbox, `inbox@DOMAIN`, created through
 * storage as test/helpers/inbox.ts does; its storage limit raised so that no run fills it.
 */
async function makeInbox(url: string, db: ReturnType<typeof openPostgres>): Promise<{ mailboxId: string }> {
  const platform = createClient({ baseUrl: url, credential: { adminKey: ADMIN_KEY } });
  const { accountToken } = await createClient({ baseUrl: url }).auth.signup({
    email: 'owner@inbound.bench.test',
    password: 'bench password 0123',
  });
  const owner = createClient({
    baseUrl: url,
    credential: { keyId: accountToken.tokenId, secret: accountToken.secret },
  });
  const { organization } = await owner.console.organizations.create({ name: 'Inbound bench' });
  await owner.console.organizations.plan({ id: organization.id, plan: 'payg' });
  const { project } = await owner.console.projects.create({ name: 'mail', organizationId: organization.id });
  const claim = await owner.console.projects.domains.create({ id: project.id, domain: DOMAIN });
  await platform.admin.senderDomains.markVerified({ id: claim.id });
  const withIn = await owner.console.projects.domains.inbound.create({ id: project.id, domainId: claim.id });
  const cap = withIn.inbound.find((i) => i.domain === DOMAIN);
  if (!cap) throw new Error(`no inbound capability for ${DOMAIN}`);
  await markInboundVerified(db, cap.id, new Date());
  const made = await createInbox(db, {
    capabilityId: cap.id,
    localpart: 'inbox',
    type: 'individual',
    passwordHash: null,
    initialPasswordSealed: null,
    now: new Date(),
  });
  if (!made) throw new Error(`inbox ${RCPT} exists`);
  await db.query('UPDATE inboxes SET storage_limit_bytes = $2 WHERE id = $1', [made.inbox.id, 2 ** 50]);
  const mailbox = made.mailboxes.find((m) => m.name === 'INBOX');
  if (!mailbox) throw new Error('the new inbox has no INBOX');
  return { mailboxId: mailbox.id };
}
