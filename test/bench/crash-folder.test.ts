// bench/service.ts's crashFolder, where each of the bench's service processes runs and a crash leaves its core file:
// a folder the process wrote into is kept and its files named; an empty one is removed.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import t from 'tap';
import { crashFolder } from '../../bench/service.js';

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
