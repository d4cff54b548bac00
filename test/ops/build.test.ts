// The production build: `npm run build` compiles the service (and the @svc-mail/sdk workspace package it
// imports) to dist/, and plain node runs it, with no hooks anywhere: no --import, no NODE_OPTIONS, from
// another working directory (as the systemd units of config/ run it, docs/operations.md). One build, then
// `svc config`, `svc migrate --status` and `svc start` up to GET /health, GET /ready (the migrations were
// found beside the compiled code) and the webmail's files, then SIGTERM.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import {
  ROOT,
  baseEnv,
  databaseEnv,
  exitWithin,
  listenEnv,
  listening,
  tempDir,
  watched,
  type Svc,
} from '../helpers/child.js';

const SVC_JS = path.join(ROOT, 'dist', 'bin', 'svc.js');

/** `node dist/bin/svc.js <args>` with exactly the SVC_* variables given and no hooks (no NODE_OPTIONS). */
function compiledSvc(t: Test, args: string[], env: Record<string, string>): Svc {
  const childEnv = { ...baseEnv(), ...env };
  delete childEnv.NODE_OPTIONS; // tap's own --import hooks and bin/resolve-sources.ts
  const child = spawn(process.execPath, [SVC_JS, ...args], {
    cwd: os.tmpdir(),
    env: childEnv,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  return watched(t, child, 'dist/bin/svc.js');
}

t.test('npm run build, then node dist/bin/svc.js with no hooks', async (t) => {
  const started = Date.now();
  const build = spawn('npm', ['run', 'build'], { cwd: ROOT, env: baseEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  let buildOut = '';
  build.stdout.setEncoding('utf8').on('data', (d: string) => (buildOut += d));
  build.stderr.setEncoding('utf8').on('data', (d: string) => (buildOut += d));
  const code = await new Promise<number | null>((resolve) => build.on('exit', resolve));
  t.equal(code, 0, `npm run build exits 0:\n${buildOut}`);
  if (code !== 0) return;
  t.comment(`built in ${Math.round((Date.now() - started) / 1000)} s`);

  const svcJs = await readFile(SVC_JS, 'utf8');
  t.equal(svcJs.split('\n')[0], '#!/usr/bin/env -S node --max-semi-space-size=32', 'the shebang has no --import');
  t.notOk(existsSync(path.join(ROOT, 'dist', 'bin', 'resolve-sources.js')), 'the hooks of the sources are not built');

  t.test('config', async (t) => {
    const dataDir = await tempDir(t);
    const s = compiledSvc(t, ['config'], { SVC_DATA_DIR: dataDir, SVC_HTTP_PORT: '8123' });
    t.same(await exitWithin(s, 'svc config'), { code: 0, signal: null }, `exit 0 ${s.stderr()}`);
    t.match(s.stdout(), /^SVC_HTTP_PORT=8123$/m, 'prints the configuration');
  });

  t.test('migrate --status finds the migrations beside the compiled code', async (t) => {
    const dataDir = await tempDir(t);
    const s = compiledSvc(t, ['migrate', '--status'], { SVC_DATA_DIR: dataDir, ...(await databaseEnv(t)) });
    t.same(await exitWithin(s, 'svc migrate --status'), { code: 0, signal: null }, `exit 0 ${s.stderr()}`);
    t.match(s.stdout(), /^pending\s+0001_foundation$/m, `lists 0001 pending:\n${s.stdout()}`);
  });

  t.test('start answers /health, /ready and the webmail, and drains on SIGTERM', async (t) => {
    const dataDir = await tempDir(t);
    const s = compiledSvc(t, ['start'], { ...listenEnv(dataDir), ...(await databaseEnv(t)) });
    const line = await listening(s);
    const base = `http://127.0.0.1:${String(line.http)}`;

    const health = await fetch(`${base}/health`);
    t.equal(health.status, 200, 'GET /health is 200');
    t.equal(((await health.json()) as { ok?: unknown }).ok, true);
    const ready = await fetch(`${base}/ready`);
    t.equal(ready.status, 200, `GET /ready is 200 (migrated, spool open): ${await ready.clone().text()}`);

    const app = await fetch(`${base}/webmail/assets/app.js`);
    t.equal(app.status, 200, 'the webmail app is served from dist/webmail');
    t.equal(await app.text(), await readFile(path.join(ROOT, 'webmail', 'app.js'), 'utf8'), 'the same file');
    const vendor = await fetch(`${base}/webmail/vendor/preact.mjs`);
    t.equal(vendor.status, 200, 'Preact is served from node_modules');
    await vendor.arrayBuffer();

    s.child.kill('SIGTERM');
    t.same(await exitWithin(s, 'svc start after SIGTERM'), { code: 0, signal: null }, 'SIGTERM: exit 0');
    t.ok(
      s.logs().some((l) => l.msg === 'stopped'),
      "logs 'stopped'",
    );
  });
});
