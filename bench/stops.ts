// The service's stops, over and over: a diagnostic for how its processes end (docs/decisions.md #80, where an MTA
// ended with SIGSEGV at its stop after a benchmark's deliveries, twice in some hundreds of stops, cause unknown), not
// a benchmark. Each round starts the mta role (and with --both the control role too) on one spool and database,
// delivers --messages of --size through a loopback DNS zone's MX to smtp-sink, waits --idle seconds (in
// `npm run bench` the service sits idle while Postfix's side runs, then stops), stops what it started (SIGTERM, as
// systemd does; with --both, the two at once, as the bench's cleanup does) and prints how each process ended: code
// 0, or the code or signal it ended with. Each process runs in a folder of its own (crashFolder in service.ts), where
// a crash leaves its core file (startChild raises its core limit, withCoreDumps); a bad end names the folder and what
// it holds, for gdb with the Node that ran it (`gdb node_modules/.bin/node <folder>/core`, then `thread apply all
// bt`).
//
//   node --import ./bin/resolve-sources.ts bench/stops.ts [--rounds 20] [--messages 10000] [--size 1k|10k|100k|1m]
//        [--idle 0] [--both] [--workers 1] [--pg URL]
import { parseArgs } from 'node:util';
import { startSink } from './sink.js';
import {
  createTenants,
  KEYS_PER_CLIENT,
  sendingSetup,
  sendLoad,
  serviceEnv,
  startChild,
  textOfSize,
  type Child,
} from './service.js';
import { benchDatabase, PG_URL, sleep } from './util.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '20' },
    messages: { type: 'string', default: '10000' },
    size: { type: 'string', default: '10k' },
    idle: { type: 'string', default: '0' },
    both: { type: 'boolean', default: false },
    // SVC_WORKERS of each process: 1 as the bench runs each role on a 2-core host; more, a cluster's primary and its
    // workers (bin/cluster.ts), as an operator's host with the default of one per core runs them.
    workers: { type: 'string', default: '1' },
    pg: { type: 'string', default: PG_URL },
  },
});
const ROUNDS = Number(args.rounds);
const N = Number(args.messages);
const C = 64;
const ORGS = 8;

const cleanups: (() => Promise<unknown>)[] = [];
let failed = 0;
try {
  const db = await benchDatabase(args.pg!, 'svc_stops', cleanups);
  const { dataDir, zone } = await sendingSetup('stops', cleanups);
  const sink = await startSink('stops');
  cleanups.push(() => sink.stop());
  const env = { ...serviceEnv(db.url, dataDir, zone.hostPort), SVC_WORKERS: args.workers! };
  const startControl = () => startChild('control', env);
  let control: Child | null = await startControl();
  // Registered once: a round that stopped the control starts it again, and this stops whichever is up at the end.
  cleanups.push(() => control?.stop() ?? Promise.resolve());
  const tenants = await createTenants(control.url, ORGS, KEYS_PER_CLIENT * Math.ceil(C / ORGS));
  for (const t of tenants) for (const [host, value] of Object.entries(t.dkimTxt)) zone.txt(host, value);
  const load = { concurrency: C, text: textOfSize(args.size!), domains: 1 };
  console.log(
    `${ROUNDS} rounds of ${N} ${args.size} messages, ${args.idle} s idle, then a stop of the mta` +
      `${args.both ? ' and the control at once' : ''}, ${args.workers} worker(s) each`,
  );
  const ends = new Map<string, number>();
  let sent = 0;
  for (let round = 1; round <= ROUNDS; round++) {
    control ??= await startControl();
    const mta = await startChild('mta', { ...env, SVC_OUTBOUND_PORT: String(sink.port) });
    const r = await sendLoad(control.url, tenants, { ...load, count: N, firstIndex: sent });
    sent += N;
    if (r.ok !== N) throw new Error(`round ${round}: ${r.ok} of ${N} accepted`);
    await sink.reached(sent, 60_000);
    await sink.clear(N);
    await sleep(Number(args.idle) * 1000);
    const stopping: [string, Child][] = [['mta', mta]];
    if (args.both) stopping.push(['control', control]);
    // How each ended, without its pid, so that the rounds' clean ends are counted alike (a bad end names its folder).
    const how = await Promise.all(
      stopping.map(([role, child]) =>
        child.stop().then(
          () => ({ pid: child.pid, ok: true, end: `${role} ended with 0` }),
          (err: Error) => ({ pid: child.pid, ok: false, end: `${role}: ${err.message}` }),
        ),
      ),
    );
    if (args.both) control = null;
    for (const h of how) {
      ends.set(h.end, (ends.get(h.end) ?? 0) + 1);
      if (!h.ok) failed++;
    }
    console.log(`round ${round}: ${how.map((h) => `${h.end} (pid ${h.pid})`).join('; ')}`);
  }
  console.log(`ends: ${[...ends].map(([how, n]) => `${n}× ${how}`).join(', ')}`);
} finally {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch((err) => console.error(`cleanup: ${err}`));
}
// An end other than 0 is what this looks for: said by the exit code too.
process.exit(failed ? 1 : 0);
