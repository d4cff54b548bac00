// Several MTA processes on one spool (issue 18 item 1, docs/decisions.md #58): real OS processes leasing from one
// LMDB environment on disk (spool-share-child.ts). No entry is leased twice while its owner lives, none is left
// behind, and when one process is killed with -9 a fresh process takes back its leases, and only its leases,
// at start. This exercises the spool's rule with real processes; the delivery worker calls the same
// recoverLeases at its start and the same lease in its poll (mta/outbound/worker.ts).
import t, { type Test } from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openLmdb } from '../../storage/lmdb/env.js';
import { openSpool, type SpoolEntry } from '../../storage/lmdb/spool.js';
import { FROM_SOURCES } from '../helpers/from-sources.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '../..');
const CHILD = path.join(HERE, 'spool-share-child.ts');
const N = 3_000;

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-spool-share-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

function entry(id: string, seq: number): SpoolEntry {
  const domain = `d${seq % 7}.share.test`;
  return {
    id,
    projectId: 'p-share',
    domain,
    mailFrom: `bounce+${id}@rp.share.test`,
    rcptTo: `rcpt${seq}@${domain}`,
    outboundId: 'o-share',
    nextAttemptMs: 1_000 + (seq % 13),
    attempts: 0,
    createdMs: 1_000,
  };
}

async function fill(dir: string, tag: string): Promise<string[]> {
  const env = await openLmdb(dir);
  const spool = openSpool(env);
  const ids = Array.from({ length: N }, (_, i) => `${tag}-${i}`);
  await spool.enqueueMany(ids.map((id, i) => ({ entry: entry(id, i), body: Buffer.from(`body of ${id}\r\n`) })));
  await env.close();
  return ids;
}

async function spoolCount(dir: string): Promise<number> {
  const env = await openLmdb(dir);
  try {
    return openSpool(env).count();
  } finally {
    await env.close();
  }
}

interface Proc {
  child: ChildProcess;
  leased: string[];
  delivered: string[];
  recovered: number | null;
  /** Lets a gated or holding child go on. */
  go(): void;
  /** Resolves with the size of the batch it holds (--hold). */
  holding: Promise<number>;
  /** Resolves once it has done its recoverLeases at start. */
  ready: Promise<void>;
  /** Resolves with the size of the batch it stalled in. */
  stalled: Promise<number>;
  exit: Promise<{ code: number | null; signal: string | null; stderr: string }>;
}

/** `gate`: it waits after its start until `go()`; `holdAfter`, `stallAfter`: see spool-share-child.ts. */
function start(t: Test, dir: string, opts: { gate?: boolean; holdAfter?: number; stallAfter?: number } = {}): Proc {
  const child = spawn(
    process.execPath,
    [
      ...FROM_SOURCES,
      CHILD,
      dir,
      ...(opts.gate ? ['--gate'] : []),
      ...(opts.stallAfter ? [`--stall=${opts.stallAfter}`] : []),
      ...(opts.holdAfter ? [`--hold=${opts.holdAfter}`] : []),
    ],
    {
      cwd: REPO,
      stdio: ['pipe', 'pipe', 'pipe'],
    },
  );
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  const p: Proc = {
    child,
    leased: [],
    delivered: [],
    recovered: null,
    exit: null as never,
    stalled: null as never,
    ready: null as never,
    go: () => void child.stdin!.write('go\n'),
    holding: null as never,
  };
  let onStall = (_n: number) => {};
  let onReady = () => {};
  let onHold = (_n: number) => {};
  let pending = '';
  let stderr = '';
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (chunk: string) => {
    pending += chunk;
    const lines = pending.split('\n');
    pending = lines.pop()!;
    for (const line of lines) {
      const [kind, value] = [line.slice(0, 1), line.slice(2)];
      if (kind === 'L') p.leased.push(value);
      else if (kind === 'D') p.delivered.push(value);
      else if (kind === 'R') {
        p.recovered = Number(value);
        onReady();
      } else if (kind === 'S') onStall(Number(value));
      else if (kind === 'H') onHold(Number(value));
    }
  });
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (c: string) => (stderr += c));
  p.exit = new Promise((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal: signal ?? null, stderr })),
  );
  p.stalled = new Promise<number>((resolve, reject) => {
    onStall = resolve;
    void p.exit.then(() => reject(new Error(`the child ended without stalling (${p.delivered.length} delivered)`)));
  });
  p.stalled.catch(() => {}); // only the stalling child's is awaited
  p.holding = new Promise<number>((resolve, reject) => {
    onHold = resolve;
    void p.exit.then(() => reject(new Error('the child ended without holding')));
  });
  p.holding.catch(() => {});
  p.ready = new Promise<void>((resolve, reject) => {
    onReady = resolve;
    void p.exit.then(() => reject(new Error('the child ended before its start')));
  });
  p.ready.catch(() => {});
  return p;
}

/** How many times each id was delivered, across processes. */
function tally(...procs: Proc[]): Map<string, number> {
  const m = new Map<string, number>();
  for (const p of procs) for (const id of p.delivered) m.set(id, (m.get(id) ?? 0) + 1);
  return m;
}

t.test('two processes share one spool: every entry delivered exactly once, none left', async (t) => {
  const dir = await tempDir(t);
  const ids = await fill(dir, 'a');
  // Both started, then let run together (one loading faster than the other would otherwise do it all).
  const a = start(t, dir, { gate: true });
  const b = start(t, dir, { gate: true });
  await Promise.all([a.ready, b.ready]);
  a.go();
  b.go();
  const [ea, eb] = await Promise.all([a.exit, b.exit]);
  t.equal(ea.code, 0, `first process ends cleanly ${ea.stderr}`);
  t.equal(eb.code, 0, `second process ends cleanly ${eb.stderr}`);
  t.same([a.recovered, b.recovered], [0, 0], 'nothing to take back');
  t.ok(
    a.delivered.length > 0 && b.delivered.length > 0,
    `both delivered (${a.delivered.length} + ${b.delivered.length})`,
  );
  const counts = tally(a, b);
  t.equal(counts.size, N, 'every id delivered');
  t.same(
    [...counts].filter(([, n]) => n > 1),
    [],
    'no id delivered twice',
  );
  t.same(
    ids.filter((id) => !counts.has(id)),
    [],
    'none missing',
  );
  t.equal(await spoolCount(dir), 0, 'the spool is empty');
});

t.test('one process killed with -9 mid-way: a fresh process takes back its leases only, none lost', async (t) => {
  const dir = await tempDir(t);
  const ids = await fill(dir, 'k');
  // The sibling started first, past its own start (which would rightly take the leases of a process already
  // dead), then both run together. Mid-way the victim stalls in a batch, half of it delivered but not removed,
  // and the sibling holds a batch of live leases while the fresh process starts.
  const b = start(t, dir, { gate: true, holdAfter: N / 6 });
  await b.ready;
  const a = start(t, dir, { gate: true, stallAfter: N / 6 });
  await a.ready;
  b.go();
  a.go();
  const [batch, held] = await Promise.all([a.stalled, b.holding]);
  a.child.kill('SIGKILL');
  const ea = await a.exit;
  t.equal(ea.signal, 'SIGKILL', 'the first process was killed');
  const stranded = new Set(a.leased);
  for (const id of a.delivered) stranded.delete(id);
  t.ok(stranded.size > 0, `the killed process held leases it had not delivered (${stranded.size})`);
  t.ok(b.child.exitCode === null, `its sibling is still at work, holding ${held} live leases`);

  // The cluster primary would respawn it: a fresh process on the same spool, while the sibling still works.
  const c = start(t, dir);
  await c.ready;
  b.go();
  const [eb, ec] = await Promise.all([b.exit, c.exit]);
  t.equal(eb.code, 0, `the sibling ends cleanly ${eb.stderr}`);
  t.equal(ec.code, 0, `the fresh process ends cleanly ${ec.stderr}`);
  t.equal(
    c.recovered,
    batch,
    `the fresh process took back at start exactly the leases the killed one held (${c.recovered} of ${batch})`,
  );

  const counts = tally(a, b, c);
  t.same(
    ids.filter((id) => !counts.has(id)),
    [],
    'no id lost: every one delivered at least once',
  );
  const leasedByA = new Set(a.leased);
  const twice = [...counts].filter(([, n]) => n > 1).map(([id]) => id);
  t.same(
    twice.filter((id) => !leasedByA.has(id)),
    [],
    `ids delivered twice (${twice.length}) are only among those the killed process had leased`,
  );
  t.equal(twice.length, batch >> 1, 'namely those it delivered and had not removed');
  t.same(
    [...counts].filter(([, n]) => n > 2),
    [],
    'none delivered three times',
  );
  t.equal(await spoolCount(dir), 0, 'the spool is empty');
});
