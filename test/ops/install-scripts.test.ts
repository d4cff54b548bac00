// npm's help for `install-scripts` says a dependency's install scripts are blocked unless package.json's
// `allowScripts` approves them; npm 11.19 still runs unapproved ones with a warning, and with
// --strict-allow-scripts refuses the install. Ours are needed: the `node` package's preinstall puts the Node 24
// the service and the tests run on at node_modules/.bin/node, lmdb's and msgpackr-extract's pick their prebuilt
// binaries (docs/operations.md, Install). So every package the lockfile marks as having install scripts is
// approved, and no other, read from the files npm reads.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { ROOT } from '../helpers/child.js';

const readJson = async (name: string): Promise<Record<string, unknown>> =>
  JSON.parse(await readFile(path.join(ROOT, name), 'utf8')) as Record<string, unknown>;

/** The names of the lockfile's packages that have install scripts (`hasInstallScript`). */
function withInstallScripts(lock: Record<string, unknown>): string[] {
  const packages = lock.packages as Record<string, { hasInstallScript?: boolean }>;
  const names = Object.entries(packages)
    // '' is this project and a path without node_modules/ one of its workspaces: their scripts are ours.
    .filter(([where, p]) => where.includes('node_modules/') && p.hasInstallScript)
    .map(([where]) => where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length));
  return [...new Set(names)].sort();
}

t.test("package.json's allowScripts approves exactly the lockfile's packages with install scripts", async (t) => {
  const [pkg, lock] = await Promise.all([readJson('package.json'), readJson('package-lock.json')]);
  const needed = withInstallScripts(lock);
  t.ok(needed.includes('node'), 'the node package, whose preinstall installs the runtime, is among them');
  const allow = (pkg.allowScripts ?? {}) as Record<string, unknown>;
  const approved = Object.keys(allow)
    .filter((name) => allow[name] === true)
    .sort();
  t.same(approved, needed, 'approved in package.json: every package with install scripts, and no other');
  t.same(
    Object.keys(allow).filter((name) => allow[name] !== true),
    [],
    'no package is denied (its runtime or native binary would be missing)',
  );
});
