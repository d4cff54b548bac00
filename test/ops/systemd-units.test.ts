// The systemd units of config/ as systemd itself reads them: `systemd-analyze verify` (syntax, known keys,
// an ExecStart binary that exists) and `systemd-analyze security --offline=yes` (the sandbox's exposure
// score, under 3.0 as docs/operations.md promises). Needs systemd-analyze (Debian's `systemd` package, which
// .ci/run installs); without it the whole file is skipped and says why.
import t, { type Test } from 'tap';
import { execFile, execFileSync } from 'node:child_process';
import { access, copyFile, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import os from 'node:os';
import path from 'node:path';
import { ROOT } from '../helpers/child.js';

const run = promisify(execFile);
const MAX_EXPOSURE = 3.0;
// The instance the template is checked as: any role name would do.
const UNITS = [
  { file: 'svc.service', unit: 'svc.service' },
  { file: 'svc@.service', unit: 'svc@mta.service' },
];

function systemdAnalyze(): string | null {
  try {
    return execFileSync('sh', ['-c', 'command -v systemd-analyze'], { encoding: 'utf8' }).trim() || null;
  } catch {
    return null;
  }
}

const tool = systemdAnalyze();
if (!tool) {
  t.plan(0, 'skip: systemd-analyze not installed (Debian package systemd; .ci/run installs it)');
} else {
  /** The unit as an operator installs it, in a directory of its own (a template under its own name). */
  const installed = async (t: Test, file: string): Promise<string> => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-units-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    await copyFile(path.join(ROOT, 'config', file), path.join(dir, file));
    return dir;
  };

  /** The "Overall exposure level" of `systemd-analyze security --offline=yes`. */
  const exposure = async (unitPath: string): Promise<{ score: number; out: string }> => {
    const { stdout } = await run(tool, ['security', '--offline=yes', '--no-pager', unitPath]);
    const m = /Overall exposure level for \S+: (\d+(?:\.\d+)?)/.exec(stdout);
    if (!m) throw new Error(`no exposure level in:\n${stdout}`);
    return { score: Number(m[1]), out: stdout };
  };

  for (const { file, unit } of UNITS) {
    t.test(`${file}: systemd-analyze verify accepts it without a warning`, async (t) => {
      const dir = await installed(t, file);
      const text = await readFile(path.join(dir, file), 'utf8');
      const exec = /^ExecStart=(\S+)/m.exec(text)?.[1];
      t.ok(exec, 'an ExecStart line');
      // verify insists on an executable ExecStart binary; a host whose node is elsewhere gets this one.
      const node = await access(exec!).then(
        () => exec!,
        () => process.execPath,
      );
      if (node !== exec) await writeFile(path.join(dir, file), text.replace(`ExecStart=${exec!}`, `ExecStart=${node}`));
      const res = await run(tool, ['verify', '--man=no', '--generators=no', path.join(dir, unit)]).then(
        ({ stdout, stderr }) => ({ code: 0, out: stdout + stderr }),
        (err: { code?: number; stdout?: string; stderr?: string }) => ({
          code: err.code ?? 1,
          out: (err.stdout ?? '') + (err.stderr ?? ''),
        }),
      );
      t.equal(res.code, 0, `exit 0: ${res.out}`);
      t.equal(res.out.trim(), '', 'and nothing said (an unknown key is only a warning)');
    });

    t.test(`${file}: systemd-analyze security scores it under ${MAX_EXPOSURE}`, async (t) => {
      const dir = await installed(t, file);
      const { score, out } = await exposure(path.join(dir, unit));
      t.ok(score < MAX_EXPOSURE, `exposure ${score} < ${MAX_EXPOSURE}:\n${out}`);
    });

    t.test(`${file}: runs the compiled code as svc-mail, JIT allowed, no IP filter`, async (t) => {
      const text = await readFile(path.join(ROOT, 'config', file), 'utf8');
      const keys = (k: string) => [...text.matchAll(new RegExp(`^${k}=(.*)$`, 'gm'))].map((m) => m[1]);
      t.same(keys('User'), ['svc-mail'], 'User=svc-mail');
      t.same(keys('Group'), ['svc-mail'], 'Group=svc-mail');
      t.equal(
        keys('ExecStart')[0]?.split(' start')[0],
        '/opt/svc-mail/node_modules/.bin/node --max-semi-space-size=32 /opt/svc-mail/dist/bin/svc.js',
        'the bundled Node runs the compiled code',
      );
      t.notMatch(text, /--import/, 'no --import: the compiled code needs no hooks');
      t.same(keys('UMask'), ['0077']);
      t.same(keys('ReadWritePaths'), ['/var/lib/svc-mail'], 'writes the data directory only');
      t.same(keys('CapabilityBoundingSet'), ['CAP_NET_BIND_SERVICE']);
      t.same(keys('AmbientCapabilities'), ['CAP_NET_BIND_SERVICE']);
      t.same(keys('RestrictAddressFamilies'), ['AF_INET AF_INET6 AF_UNIX AF_NETLINK']);
      // V8 maps JIT code writable and executable: Node does not start under MemoryDenyWriteExecute=yes.
      t.same(keys('MemoryDenyWriteExecute'), [], 'MemoryDenyWriteExecute is left off');
      t.same(keys('IPAddressDeny'), [], 'no IPAddressDeny: a mail server talks to the whole internet');
    });
  }

  t.test('the score discriminates: a unit without a sandbox scores over the limit', async (t) => {
    const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-units-'));
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const bare = path.join(dir, 'bare.service');
    await writeFile(bare, '[Service]\nExecStart=/usr/bin/node /opt/svc-mail/dist/bin/svc.js start\n');
    const { score } = await exposure(bare);
    t.ok(score >= MAX_EXPOSURE, `exposure ${score} >= ${MAX_EXPOSURE}`);
  });
}
