// bench/util.ts's machineCpu, behind the bench's "machine N% busy": it counts the cores of the process's affinity
// (taskset) and no others, and a thread kept busy shows as busy time.
import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { machineShare } from '../../bench/util.js';
import { FROM_SOURCES } from '../helpers/from-sources.js';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

// A child that reads machineCpu, keeps one thread busy for 400 ms, reads it again: the readings' differences and the
// time between them.
const SPIN = `
import { machineCpu } from './bench/util.ts';
const a = machineCpu();
const t0 = performance.now();
while (performance.now() - t0 < 400) Math.sqrt(Math.random());
const b = machineCpu();
console.log(JSON.stringify({ busy: b.busy - a.busy, all: b.all - a.all, seconds: (performance.now() - t0) / 1000 }));
`;

async function spin(pinned: boolean): Promise<{ busy: number; all: number; seconds: number }> {
  const argv = [process.execPath, ...FROM_SOURCES, '--input-type=module', '-e', SPIN];
  const { stdout } = pinned
    ? await run('taskset', ['-c', '0', ...argv], { cwd: ROOT })
    : await run(argv[0]!, argv.slice(1), { cwd: ROOT });
  return JSON.parse(stdout);
}

t.test('the cores counted are those of the affinity: one under taskset -c 0, all otherwise', async (t) => {
  const cores = os.availableParallelism();
  const one = await spin(true);
  // /proc/stat counts in hundredths of a second, and time the hypervisor steals is left out: a margin for both.
  t.ok(Math.abs(one.all / one.seconds - 1) < 0.3, `one core's time under taskset -c 0 (${JSON.stringify(one)})`);
  t.ok(one.busy / one.all > 0.8, `the pinned core kept busy by the spinning thread (${JSON.stringify(one)})`);
  const every = await spin(false);
  t.ok(
    Math.abs(every.all / every.seconds - cores) < 0.3 * cores,
    `${cores} cores' time unpinned (${JSON.stringify(every)})`,
  );
  t.ok(every.busy / every.seconds > 0.8, `at least the spinning thread's time is busy (${JSON.stringify(every)})`);
});

t.test('machineShare: the share of the cores kept busy, and the busy time per item', async (t) => {
  const before = { busy: 10, all: 20 };
  const after = { busy: 11.5, all: 22 };
  t.same(machineShare(before, after, 500), { machineBusy: 0.75, machineCpuMsPerMessage: 3 });
});
