// bench/service.ts's crashFolder, where each of the bench's service processes runs and a crash leaves its core file:
// a folder the process wrote into is kept and its files named; an empty one is removed. And withCoreDumps, which runs
// each with its core limit raised so that a crash leaves one.
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { crashFolder, withCoreDumps } from '../../bench/service.js';

const run = promisify(execFile);

t.test('crashFolder: a folder a process wrote into is kept and what it holds is said', async (t) => {
  const mta = await crashFolder('mta');
  const again = await crashFolder('mta');
  t.not(again.dir, mta.dir, 'a second process of a role has a folder of its own');
  t.ok(path.basename(mta.dir).startsWith('svc-cores-mta-'), 'named by its role');
  t.teardown(() => rm(mta.dir, { recursive: true, force: true }));
  // What a crash does there: a file in the process's working directory.
  await run(process.execPath, ['-e', "require('node:fs').writeFileSync('core', 'x')"], { cwd: mta.dir });
  t.equal(await mta.left(), `; ${mta.dir} holds core`);
  t.ok(existsSync(path.join(mta.dir, 'core')), 'the core file stays for gdb');
  t.equal(await again.left(), '');
  t.notOk(existsSync(again.dir), 'the empty folder is removed');
});

t.test('withCoreDumps: the command runs with its soft core limit raised to the hard one', async (t) => {
  const [file, args] = withCoreDumps('/bin/sh', ['-c', 'cat /proc/self/limits']);
  const { stdout } = await run(file, args);
  const { soft, hard } = coreLimits(stdout);
  t.equal(soft, hard);
});

/** The soft and hard limits on core files in a /proc/<pid>/limits text. */
function coreLimits(limits: string): { soft?: string; hard?: string } {
  const [, soft, hard] = /^Max core file size\s+(\S+)\s+(\S+)/m.exec(limits) ?? [];
  return { soft, hard };
}

// Only where the kernel writes a crash's core as a file named `core` in its working directory (its default), and
// the hard limit lets it write one.
const pattern = readFileSync('/proc/sys/kernel/core_pattern', 'utf8').trim();
const hardLimit = coreLimits(readFileSync('/proc/self/limits', 'utf8')).hard;
t.test(
  'withCoreDumps: a command so started and ended by SIGSEGV leaves its core in its folder',
  {
    skip:
      pattern !== 'core'
        ? `kernel.core_pattern is ${JSON.stringify(pattern)}, not a file in the folder`
        : hardLimit === '0'
          ? 'the hard limit on core files is 0'
          : false,
  },
  async (t) => {
    const folder = await crashFolder('crash');
    t.teardown(() => rm(folder.dir, { recursive: true, force: true }));
    // A shell that ends itself with SIGSEGV, as a native addon's fault would end the service: a small core.
    const [sh, crash] = withCoreDumps('/bin/sh', ['-c', 'kill -SEGV $$']);
    const ended = await run(sh, crash, { cwd: folder.dir }).then(
      () => 'exit 0',
      (err: { signal?: string }) => err.signal,
    );
    t.equal(ended, 'SIGSEGV');
    t.match(await folder.left(), /holds core/);
  },
);
