// bin/resolve-sources.ts, the hooks every source run loads (docs/decisions.md #81), in children of their own: what
// the import names of a source file resolve to. (Every other test file and the svc children load through it too.)
import t from 'tap';
import { execFile } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { FROM_SOURCES } from '../helpers/from-sources.js';
import { ROOT, tempDir } from '../helpers/child.js';

const run = promisify(execFile);

/** Runs `file` with the hooks; its standard output. */
async function runFromSources(file: string): Promise<string> {
  const { stdout } = await run(process.execPath, [...FROM_SOURCES, file], { cwd: ROOT, timeout: 30_000 });
  return stdout;
}

t.test("a source's './x.js' is the source './x.ts' beside it, and @svc-mail/sdk is the SDK's source", async (t) => {
  const dir = await tempDir(t);
  const main = path.join(dir, 'main.ts');
  await writeFile(path.join(dir, 'beside.ts'), "export const where: string = 'beside.ts';\n");
  await writeFile(
    main,
    [
      "import { where } from './beside.js';",
      'console.log(JSON.stringify({',
      '  where,',
      "  beside: import.meta.resolve('./beside.js'),",
      `  sdk: import.meta.resolve('@svc-mail/sdk'),`,
      '}));',
      '',
    ].join('\n'),
  );
  const seen = JSON.parse(await runFromSources(main)) as { where: string; beside: string; sdk: string };
  t.equal(seen.where, 'beside.ts', 'the import ran the .ts source');
  t.equal(seen.beside, pathToFileURL(path.join(dir, 'beside.ts')).href);
  t.equal(seen.sdk, pathToFileURL(path.join(ROOT, 'sdk', 'src', 'index.ts')).href, 'the source, not sdk/dist');
});

t.test('a .js file that exists is imported as it stands', async (t) => {
  const dir = await tempDir(t);
  const main = path.join(dir, 'main.ts');
  await writeFile(path.join(dir, 'plain.js'), "export const where = 'plain.js';\n");
  await writeFile(main, "import { where } from './plain.js';\nconsole.log(where);\n");
  t.equal((await runFromSources(main)).trim(), 'plain.js');
});

t.test('a name that is neither fails as Node fails it', async (t) => {
  const dir = await tempDir(t);
  const main = path.join(dir, 'main.ts');
  await writeFile(main, "import './absent.js';\n");
  const failed = await runFromSources(main).then(
    () => null,
    (err: { stderr: string }) => err,
  );
  t.match(failed?.stderr, /ERR_MODULE_NOT_FOUND/, 'the run fails, and says why');
});
