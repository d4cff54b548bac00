// bench/util.ts's coreWaitSecondsSince, behind bench:accept's "waited for a core": the time a process's main thread
// spent runnable and not running (/proc/<pid>/schedstat's second field), not its time running (the first).
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import t from 'tap';
import { coreWaitSeconds, coreWaitSecondsSince, cpuSecondsSince, sleep } from '../../bench/util.js';

// Without CONFIG_SCHED_INFO the kernel keeps no such account, and bench:accept says nothing of it.
const skip = coreWaitSeconds(process.pid) === null ? 'this kernel keeps no /proc/<pid>/schedstat' : false;

/** A process that spins on core 0 alone (taskset execs it: the pid is the spinner's) until killed. */
async function spinnerOnCore0(): Promise<ChildProcess> {
  const code = "console.log('spinning'); for (;;) Math.sqrt(Math.random());";
  const child = spawn('taskset', ['-c', '0', process.execPath, '-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  await once(child.stdout!, 'data');
  return child;
}

const stopped = async (c: ChildProcess) => {
  c.kill('SIGKILL');
  if (c.exitCode === null && c.signalCode === null) await once(c, 'exit');
};

t.test('three spinners on one core: together they wait about twice as long as they run', { skip }, async (t) => {
  const spinners = await Promise.all([spinnerOnCore0(), spinnerOnCore0(), spinnerOnCore0()]);
  t.teardown(() => Promise.all(spinners.map(stopped)));
  const pids = new Set(spinners.map((c) => c.pid));
  const match = (p: { pid: number }) => pids.has(p.pid);
  const waited = coreWaitSecondsSince(match);
  const ran = cpuSecondsSince(match);
  const from = performance.now();
  await sleep(1000);
  const [w, r, wall] = [waited(), ran(), (performance.now() - from) / 1000];
  // One core runs one of the three at a time, so each waits about two thirds of the wall time and runs one third
  // (less if anything else runs on core 0, which only adds to the wait).
  t.ok(r <= wall * 1.1, `they ran at most one core's time (${r.toFixed(2)} s of ${wall.toFixed(2)})`);
  t.ok(w >= wall * 1.5, `they waited about two cores' time (${w.toFixed(2)} s of ${wall.toFixed(2)})`);
  t.ok(w > 1.4 * r, `the wait is not the run time read again (${w.toFixed(2)} s against ${r.toFixed(2)})`);
});

t.test('a sleeping process waits for nothing; one gone in between counts as none', { skip }, async (t) => {
  const sleeper = spawn(process.execPath, ['-e', "console.log('up'); setInterval(() => {}, 1000)"], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  t.teardown(() => stopped(sleeper));
  await once(sleeper.stdout!, 'data');
  const spinner = await spinnerOnCore0();
  const pids = new Set([sleeper.pid, spinner.pid]);
  const waited = coreWaitSecondsSince((p) => pids.has(p.pid));
  const sleeperWaited = coreWaitSecondsSince((p) => p.pid === sleeper.pid);
  await sleep(300);
  await stopped(spinner);
  const w = waited();
  t.ok(w >= 0 && w < 0.05, `the ended spinner left out, the sleeper near nothing (read ${w})`);
  t.ok(sleeperWaited() < 0.05, 'the sleeper alone: near nothing');
  t.equal(coreWaitSeconds(spinner.pid!), null, 'a process that is gone has no account');
});
