// bench/service.ts's crashFolders, where the bench's service processes run and a crash leaves its core file: one
// folder per process, the ones holding anything named and kept, the whole removed when none does.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { crashFolders } from '../../bench/service.js';

const run = promisify(execFile);

t.test('crashFolders: a folder a process wrote into is kept and named, the others go', async (t) => {
  const crashes = await crashFolders();
  const mta = await crashes.folder('mta');
  const control = await crashes.folder('control');
  const again = await crashes.folder('mta');
  t.not(again, mta, 'a second process of a role has a folder of its own');
  t.equal(path.dirname(mta), path.dirname(control));
  // What a crash does there: a file in the process's working directory.
  await run(process.execPath, ['-e', "require('node:fs').writeFileSync('core', 'x')"], { cwd: mta });
  t.same(await crashes.kept(), [mta]);
  t.ok(existsSync(path.join(mta, 'core')), 'the core file stays for gdb');
  t.teardown(() => rm(path.dirname(mta), { recursive: true, force: true }));
});

t.test('crashFolders: with no process leaving anything, nothing is kept', async (t) => {
  const crashes = await crashFolders();
  const dir = await crashes.folder('mta');
  t.same(await crashes.kept(), []);
  t.notOk(existsSync(path.dirname(dir)), 'the temp folder is removed');
});
