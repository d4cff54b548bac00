// bench/util.ts's cpuSecondsSince, behind the bench's Postgres CPU a message: time since the call, process by process,
// so a process that ends in between takes only its own time with it, and one that starts later counts from its start.
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import t from 'tap';
import { cpuSecondsOf, cpuSecondsSince } from '../../bench/util.js';

/** A child that runs until it has used `spinMs` of CPU in all (its start-up included), then sleeps until killed. */
async function spinner(spinMs: number): Promise<ChildProcess> {
  const code = `const used = () => { const u = process.cpuUsage(); return u.user + u.system; };
    while (used() < ${spinMs * 1000}) for (let i = 0; i < 1e5; i++) Math.sqrt(i);
    console.log('spun'); setInterval(() => {}, 1000);`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout!, 'data');
  return child;
}

const stopped = async (c: ChildProcess) => {
  c.kill('SIGKILL');
  if (c.exitCode === null && c.signalCode === null) await once(c, 'exit');
};

t.test('a process alive throughout counts from the call; one that starts later, from its start', async (t) => {
  const early = await spinner(400);
  t.teardown(() => stopped(early));
  let late: ChildProcess | undefined;
  t.teardown(() => (late ? stopped(late) : undefined));
  const pids = new Set([early.pid]);
  const since = cpuSecondsSince((p) => pids.has(p.pid));
  t.ok(since() < 0.05, 'nothing yet: the early one sleeps, its 0.4 s spun before the call');
  late = await spinner(300);
  pids.add(late.pid);
  const s = since();
  t.ok(s >= 0.25 && s < 0.45, `the late one's 0.3 s, in ticks of 10 ms (read ${s})`);
});

t.test('a process that ends in between is counted as none, never as a negative', async (t) => {
  const a = await spinner(300);
  const b = await spinner(300);
  t.teardown(() => stopped(b));
  const pids = new Set([a.pid, b.pid]);
  const match = (p: { pid: number }) => pids.has(p.pid);
  const before = cpuSecondsOf(match);
  const since = cpuSecondsSince(match);
  await stopped(a);
  t.ok(cpuSecondsOf(match) - before < -0.2, 'two sums taken apart lose the ended one whole');
  const s = since();
  t.ok(s >= 0 && s < 0.05, `since the call: nothing, the ended one left out (read ${s})`);
});
