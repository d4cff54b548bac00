// The folder boundaries of docs/architecture.md, checked on every tracked .ts file so that they stay:
// the roles (control, mta, imap) never import each other; mail/ is the ground floor and imports nothing
// outside itself (nor Koa); storage/ imports no role and no core/; config/ no role, core/ or storage/;
// core/ no role and no Koa; sdk/ is a package of its own: nothing outside sdk/, no node: builtins in
// sdk/src; dev/ (development mode) is imported by bin/ alone and imports no role. A violation fails
// naming the file and the import. test/ and bench/ may import anything.
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';

interface Source {
  /** Repository-relative, with forward slashes. */
  file: string;
  text: string;
}

interface Violation {
  file: string;
  specifier: string;
  rule: string;
}

const ROLES = ['control', 'mta', 'imap'];
const KOA = (pkg: string) => pkg === 'koa' || pkg.startsWith('@koa/') || pkg.startsWith('koa-');

/** Every module specifier a file imports or re-exports, statically or dynamically, comments left out. */
function importsOf(text: string): string[] {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');
  const found: string[] = [];
  const patterns = [
    /\b(?:import|export)\s+(?:type\s+)?[^'";]*?\bfrom\s*['"]([^'"]+)['"]/g,
    /\bimport\s*\(\s*['"]([^'"]+)['"]\s*\)/g,
    /^\s*import\s+['"]([^'"]+)['"]/gm,
  ];
  for (const re of patterns) for (const m of code.matchAll(re)) found.push(m[1]!);
  return found;
}

/** The top folder a relative specifier lands in, or null for a package or builtin. */
function targetFolder(file: string, specifier: string): string | null {
  if (!specifier.startsWith('.')) return null;
  const resolved = path.posix.normalize(path.posix.join(path.posix.dirname(file), specifier));
  return resolved.startsWith('..') ? '(outside the repository)' : resolved.split('/')[0]!;
}

/** What `file` may not import: a reason when `specifier` breaks a boundary, else null. */
function broken(file: string, specifier: string): string | null {
  const from = file.split('/')[0]!;
  const to = targetFolder(file, specifier);
  const pkg = to === null ? specifier : null;
  if (ROLES.includes(from) && to && ROLES.includes(to) && to !== from)
    return `the roles never import each other (${from}/ → ${to}/)`;
  if (from === 'mail') {
    if (to && to !== 'mail') return `mail/ is the ground floor: it imports nothing outside mail/ (→ ${to}/)`;
    if (pkg && KOA(pkg)) return 'mail/ does not import Koa';
  }
  if (from === 'storage' && to && [...ROLES, 'core'].includes(to))
    return `storage/ imports no role and no core/ (→ ${to}/)`;
  if (from === 'config' && to && [...ROLES, 'core', 'storage'].includes(to))
    return `config/ imports no role, core/ or storage/ (→ ${to}/)`;
  if (from === 'core') {
    if (to && ROLES.includes(to)) return `core/ imports no role (→ ${to}/)`;
    if (pkg && KOA(pkg)) return 'core/ does not import Koa';
  }
  // docs/development.md: development mode is composed by `svc dev` alone, never reachable from `svc start`.
  if (to === 'dev' && !['dev', 'bin', 'test'].includes(from))
    return `dev/ is development mode: only bin/ and test/ import it (${from}/ → dev/)`;
  if (from === 'dev' && to && ROLES.includes(to)) return `dev/ imports no role (→ ${to}/)`;
  if (from === 'sdk') {
    if (to && to !== 'sdk') return `sdk/ is a package of its own: nothing outside sdk/ (→ ${to}/)`;
    if (pkg?.startsWith('node:') && file.startsWith('sdk/src/'))
      return 'sdk/src depends on no Node.js builtin: no node: imports';
  }
  return null;
}

function violations(sources: Source[]): Violation[] {
  return sources.flatMap(({ file, text }) =>
    importsOf(text).flatMap((specifier) => {
      const rule = broken(file, specifier);
      return rule ? [{ file, specifier, rule }] : [];
    }),
  );
}

/**
 * Imports that break a rule today, each with why it stays for now. An entry that no longer occurs fails
 * the test, so that the list only shrinks.
 */
const KNOWN: { file: string; specifier: string; why: string }[] = [];

const root = execFileSync('git', ['rev-parse', '--show-toplevel'], { encoding: 'utf8' }).trim();
const tracked = execFileSync('git', ['ls-files', '-z', '--', '*.ts'], { cwd: root, encoding: 'utf8' })
  .split('\0')
  .filter((f) => f && !f.startsWith('node_modules/'));

t.test('the folder boundaries hold on every tracked .ts file', async (t) => {
  t.ok(tracked.length > 100, `${tracked.length} files read`);
  const found = violations(tracked.map((file) => ({ file, text: readFileSync(path.join(root, file), 'utf8') })));
  const known = (v: Violation) => KNOWN.some((k) => k.file === v.file && k.specifier === v.specifier);
  const news = found.filter((v) => !known(v)).map((v) => `${v.file} imports '${v.specifier}': ${v.rule}`);
  t.same(news, [], 'no import crosses a boundary');
  for (const k of KNOWN) {
    t.ok(
      found.some((v) => v.file === k.file && v.specifier === k.specifier),
      `known exception still present (else remove it from KNOWN): ${k.file} → ${k.specifier}`,
    );
  }
});

t.test('the checker catches each rule (it can fail)', async (t) => {
  const cases: [string, string, RegExp | null][] = [
    ['control/app.ts', "import { x } from '../mta/outbound/worker.js';", /roles never import each other/],
    ['mta/inbound/listener.ts', "export { y } from '../../control/errors.js';", /roles never import each other/],
    ['mta/x.ts', "const m = await import('../imap/server.js');", /roles never import each other/],
    ['imap/server.ts', "import type { Z } from '../control/deps.js';", /roles never import each other/],
    ['mail/dns.ts', "import type { Clock } from '../config/context.js';", /ground floor/],
    ['mail/x.ts', "import { q } from '../storage/pg/client.js';", /ground floor/],
    ['mail/x.ts', "import Koa from 'koa';", /Koa/],
    ['storage/pg/x.ts', "import { a } from '../../mta/poll-loop.js';", /storage\/ imports no role/],
    ['storage/x.ts', "import { a } from '../core/y.js';", /storage\/ imports no role/],
    ['config/x.ts', "import { a } from '../storage/index.js';", /config\/ imports no role/],
    ['core/x.ts', "import Router from '@koa/router';", /core\/ does not import Koa/],
    ['core/x.ts', "import { a } from '../control/app.js';", /core\/ imports no role/],
    ['sdk/src/index.ts', "import { r } from '../../control/api/index.js';", /nothing outside sdk/],
    ['sdk/src/index.ts', "import { randomUUID } from 'node:crypto';", /no node: imports/],
    ['control/app.ts', "import { a } from '../dev/sink.js';", /only bin\/ and test\/ import it/],
    ['mail/x.ts', "import { a } from '../dev/zone.js';", /ground floor/],
    ['dev/x.ts', "import { a } from '../mta/outbound/worker.js';", /dev\/ imports no role/],
    ['bin/dev.ts', "import { a } from '../dev/zone.js';", null],
    ['dev/records.ts', "import { a } from '../storage/pg/domains.js';", null],
    ['mta/x.ts', "import { a } from '../mail/verp.js';", null],
    ['control/x.ts', "import { a } from './errors.js';", null],
    ['mail/x.ts', "import { a } from './resolver.js';\nimport { b } from 'node:net';", null],
    ['config/x.ts', "import type { Resolver } from '../mail/resolver.js';", null],
    ['test/x.ts', "import { a } from '../control/app.js';\nimport { b } from '../mta/x.js';", null],
    ['control/x.ts', "// see import { a } from '../mta/x.js' in a comment\n/* import '../mta/y.js' */", null],
  ];
  for (const [file, text, rule] of cases) {
    const v = violations([{ file, text }]);
    if (rule) t.match(v, [{ file, rule }], `${file}: ${text.split('\n')[0]}`);
    else t.same(v, [], `${file}: allowed`);
  }
});
