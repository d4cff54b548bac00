// Several MTA processes on one spool (issue 18 item 1, docs/decisions.md #58), end to end: real `svc start --role
// mta` children sharing one SVC_DATA_DIR and one Postgres, a `--role control` child taking the sends, and a
// receiving SMTP server here that can hold a message's DATA until the test lets it go (so that a delivery is
// surely in progress, its lease live, while another MTA process starts).
//
// Postgres only (the PostgreSQL pass of .ci/run): the embedded database lives inside one process.
import t, { type Test } from 'tap';
import { SMTPServer } from 'smtp-server';
import { clientsFor } from '../helpers/service.js';
import { exitWithin, listening, serviceEnv, svc, tempDir, type Svc } from '../helpers/child.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { openLmdb } from '../../storage/lmdb/env.js';

const skip = process.env.SVC_DATABASE_URL
  ? false
  : 'several processes need a shared real Postgres: set SVC_DATABASE_URL';

interface GatedSink {
  port: number;
  /** [messageId, rcpt] of each message accepted, in order. */
  received: { id: string; rcpt: string }[];
  /** DATA of messages to held.test waiting for release(). */
  waiting: number;
  /** Resolves once `n` messages are held in DATA. */
  holding(n: number): Promise<void>;
  release(): void;
}

// The message id, from the VERP return path each copy is sent with (mail/verp.ts).
function idOf(mailFrom: string): string {
  const h = /^b-([0-9a-f]{32})-/.exec(mailFrom)?.[1] ?? mailFrom;
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
}

async function gatedSink(t: Test): Promise<GatedSink> {
  let open!: () => void;
  const gate = new Promise<void>((r) => (open = r));
  const sink: GatedSink = {
    port: 0,
    received: [],
    waiting: 0,
    holding: async (n) => {
      await waitFor(() => sink.waiting === n, { timeoutMs: 30_000, what: `${n} held messages in DATA` });
    },
    release: () => open(),
  };
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['AUTH'],
    disableReverseLookup: true,
    logger: false,
    onData(stream, session, cb) {
      stream.resume();
      stream.on('end', () => {
        const rcpt = session.envelope.rcptTo.map((r) => r.address).join(',');
        const accept = () => {
          sink.received.push({ id: idOf(session.envelope.mailFrom ? session.envelope.mailFrom.address : ''), rcpt });
          cb();
        };
        if (!rcpt.endsWith('@held.test')) return accept();
        sink.waiting++;
        void gate.then(() => {
          sink.waiting--;
          accept();
        });
      });
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  sink.port = (server.server.address() as { port: number }).port;
  t.teardown(() => {
    sink.release();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return sink;
}

async function setup(t: Test) {
  const zone = await startDnsZone(t);
  zone.mx('held.test', 10, 'mx.held.test').a('mx.held.test', '127.0.0.1');
  zone.mx('free.test', 10, 'mx.free.test').a('mx.free.test', '127.0.0.1');
  const sink = await gatedSink(t);
  const dataDir = await tempDir(t);
  const env = {
    ...(await serviceEnv(t, { dataDir, dns: zone.hostPort, outboundPort: sink.port })),
    // Each child one process, so that the owners of the leases are the children this test starts and kills
    // (`svc start` with several workers is test/cli/cluster.test.ts's).
    SVC_WORKERS: '1',
    // Which process leases a message is a race, and the sink holds every session it gets: room for many held
    // sessions to the one sink host, so that a process that keeps winning never waits for one (at 10, the
    // default, one that won six times in a row did, and the message never reached DATA).
    SVC_MAX_SESSIONS_PER_HOST: '100',
  };
  const control = svc(t, ['start', '--role', 'control'], env);
  const url = String((await listening(control)).publicUrl);
  const s = await sender(clientsFor(() => url));
  const mta = async (): Promise<Svc> => {
    const child = svc(t, ['start', '--role', 'mta'], env);
    await waitFor(
      () => {
        if (child.exit)
          throw new Error(`mta exited ${JSON.stringify(child.exit)}:\n${child.stdout()}\n${child.stderr()}`);
        return child.logs().some((l) => l.msg === 'MTA delivering');
      },
      { timeoutMs: 30_000, what: 'the MTA process delivering' },
    );
    return child;
  };
  return { sink, s, mta, dataDir };
}

async function send(s: Sender, to: string, n: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    for (;;) {
      try {
        const r = await s.key.v1.services.sendEmail({
          from: `ada@${s.domain}`,
          to: `${tag}${i}@${to}`,
          subject: `${tag} ${i}`,
          text: `message ${i}`,
        });
        ids.push(r.providerMessageId);
        break;
      } catch (err) {
        // The key's rate limit (docs/decisions.md #7) answers 429: wait and send it again.
        if ((err as { status?: number }).status !== 429) throw err;
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  }
  return ids;
}

/** Ids of the messages this MTA process attempted, from its 'delivery attempt' lines. */
const attemptedBy = (p: Svc) => p.logs().flatMap((l) => (l.msg === 'delivery attempt' ? [String(l.messageId)] : []));

t.test(
  'an MTA process starting beside one that is delivering leaves its leases alone: each message once',
  { skip },
  async (t) => {
    const { sink, s, mta } = await setup(t);
    const a = await mta();
    // A's deliveries in progress: their DATA held at the receiver, their leases live.
    const held = await send(s, 'held.test', 8, 'h');
    await sink.holding(held.length);

    const b = await mta();
    // B's poll loop starts only once its recoverLeases is done: a message it delivers shows it is past that.
    const free: string[] = [];
    await waitFor(
      async () => {
        free.push(...(await send(s, 'free.test', 2, `f${free.length}-`)));
        return attemptedBy(b).length > 0;
      },
      { timeoutMs: 30_000, everyMs: 50, what: 'the second MTA process delivering' },
    );
    t.equal(sink.waiting, held.length, 'the held deliveries are still in progress');
    sink.release();
    const all = [...held, ...free];
    await waitFor(() => new Set(sink.received.map((r) => r.id)).size === all.length, {
      timeoutMs: 30_000,
      what: 'every message at the receiver',
    });
    // Time for a double delivery to show, were there one (B would have dialled the held ones again at once).
    await waitFor(() => attemptedBy(a).length + attemptedBy(b).length >= all.length, {
      timeoutMs: 30_000,
      what: 'every attempt logged',
    });
    const ids = sink.received.map((r) => r.id);
    t.same(
      ids.filter((id, i) => ids.indexOf(id) !== i),
      [],
      'no message received twice',
    );
    t.same(
      all.filter((id) => !ids.includes(id)),
      [],
      'every message received',
    );
    t.notOk(
      b.logs().some((l) => l.recovered !== undefined),
      'the second process took back no lease',
    );
    t.same(
      held.filter((id) => attemptedBy(b).includes(id)),
      [],
      'the second process never attempted the first one’s held deliveries',
    );
  },
);

t.test(
  'one of two MTA processes killed with -9: the process started next takes back its leases, and only its',
  { skip },
  async (t) => {
    const { sink, s, mta, dataDir } = await setup(t);
    // The first process holds some deliveries in progress; then, with the second one up, more are sent until
    // the second holds some too (which process leases a due message is a race the spool settles).
    const a = await mta();
    const held = await send(s, 'held.test', 4, 'h');
    await sink.holding(held.length);
    const b = await mta();
    // Who holds which, as the spool says (read here, a third process on the environment).
    const byPid = async () => {
      const pids = new Map<number, string[]>();
      for (const [id, pid] of await leaseOwners(dataDir)) pids.set(pid, [...(pids.get(pid) ?? []), id]);
      return pids;
    };
    const pids = await waitFor(
      async () => {
        held.push(...(await send(s, 'held.test', 1, `h${held.length}-`)));
        await sink.holding(held.length);
        const pids = await byPid();
        return pids.get(b.child.pid!) ? pids : null;
      },
      { timeoutMs: 30_000, what: 'the second process holding a delivery in progress' },
    );
    t.same([...pids.values()].flat().sort(), [...held].sort(), 'every held message is leased');
    t.same([...pids.keys()].sort(), [a.child.pid, b.child.pid].sort(), 'by the two MTA processes');
    const [victim, survivor] = [a, b];
    const victims = pids.get(victim.child.pid!)!;
    const survivors = pids.get(survivor.child.pid!)!;
    victim.child.kill('SIGKILL');
    await exitWithin(victim, 'the victim MTA after SIGKILL');

    const c = await mta();
    const line = await waitFor(() => c.logs().find((l) => typeof l.recovered === 'number'), {
      timeoutMs: 30_000,
      what: 'the fresh process taking back the killed one’s leases',
    });
    t.equal(line.recovered, victims.length, `it took back the killed process’s ${victims.length} leases`);
    sink.release();
    // Taken back, the killed process's messages are due at once in the shared spool: the fresh process or the
    // survivor, whichever polls first, leases them. The survivor's live leases are its own alone.
    const retried = (id: string) => attemptedBy(c).includes(id) || attemptedBy(survivor).includes(id);
    await waitFor(() => victims.every(retried) && survivors.every((id) => attemptedBy(survivor).includes(id)), {
      timeoutMs: 30_000,
      what: 'every held message delivered',
    });
    t.same(
      held.filter((id) => attemptedBy(c).includes(id) && !victims.includes(id)),
      [],
      'the fresh process delivered none of the survivor’s messages',
    );
    t.same(
      victims.filter((id) => attemptedBy(c).includes(id) && attemptedBy(survivor).includes(id)),
      [],
      'each of the killed process’s messages retried once',
    );
  },
);

/** Message id → pid of the process holding its lease, read from the spool on disk. */
async function leaseOwners(dataDir: string): Promise<Map<string, number>> {
  const env = await openLmdb(dataDir);
  try {
    const leases = env.root.openDB<[number, string], string>({ name: 'leases' });
    const out = new Map<string, number>();
    for (const { key, value } of leases.getRange({})) out.set(key, Number(value[1].split(':')[0]));
    return out;
  } finally {
    await env.close();
  }
}
