// bench/util.ts's watchDisk, behind the bench's "disk stalled up to N ms": the rule that makes stalls of its
// samples, and the device it finds for a directory, checked against coreutils' stat and the kernel's own list.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, open, readFile, rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import t from 'tap';
import { diskStalls, watchDisk } from '../../bench/util.js';

const run = promisify(execFile);
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

t.test('diskStalls: a stall runs from the last progress to the next, and only while requests wait', async (t) => {
  const s = diskStalls();
  // Busy and finishing requests: no stall.
  s.sample(0, 10, 2);
  s.sample(10, 12, 2);
  // Three samples with requests in flight and none finished, then one finished: 10 → 50.
  s.sample(20, 12, 1);
  s.sample(30, 12, 1);
  s.sample(40, 12, 3);
  s.sample(50, 13, 0);
  // Idle, nothing in flight: no stall however long.
  s.sample(60, 13, 0);
  s.sample(90, 13, 0);
  // Requests waiting until the watch ends: counted to its end, from the last sample that saw the disk idle.
  s.sample(100, 13, 1);
  s.sample(110, 13, 1);
  t.same(s.end(125), [40, 35]);
  const none = diskStalls();
  none.sample(0, 1, 0);
  t.same(none.end(50), [], 'a lone idle sample is no stall');
});

// The kernel's list of block devices with their statistics: "major:minor" → name.
async function diskstats(): Promise<Map<string, string>> {
  const lines = (await readFile('/proc/diskstats', 'latin1')).split('\n').map((l) => l.trim().split(/\s+/));
  return new Map(lines.filter((f) => f.length > 3).map((f) => [`${f[0]}:${f[1]}`, f[2]!]));
}

t.test('watchDisk finds the device stat(1) names, or none where the kernel keeps no statistics', async (t) => {
  const devices = await diskstats();
  for (const dir of [ROOT, '/var/tmp', '/dev/shm', '/proc'].filter((d) => existsSync(d))) {
    const { stdout } = await run('stat', ['-c', '%Hd:%Ld', dir]);
    const expected = devices.get(stdout.trim()) ?? null;
    const stop = watchDisk(dir);
    t.equal(stop === null ? null : stop().device, expected, `${dir} (${stdout.trim()})`);
  }
  t.ok([...devices.values()].length > 0, 'the kernel lists block devices');
});

// /var/tmp: on a disk where the tests' TMPDIR may be memory (a container's overlay has no statistics).
const varTmp = existsSync('/var/tmp') ? watchDisk('/var/tmp') : null;

t.test(
  'watchDisk over real writes and fsyncs: a longest stall within the watch, no more stalls past 50 ms than it holds',
  { skip: varTmp ? false : 'no /var/tmp, or on no device /proc/diskstats lists' },
  async (t) => {
    varTmp?.();
    const dir = await mkdtemp('/var/tmp/svc-watch-disk-');
    t.teardown(() => rm(dir, { recursive: true, force: true }));
    const stop = watchDisk(dir)!;
    const started = performance.now();
    const f = await open(path.join(dir, 'f'), 'w');
    for (let i = 0; i < 20; i++) {
      await f.write(Buffer.alloc(4096, i));
      await f.datasync();
    }
    await f.close();
    const r = stop();
    const elapsed = performance.now() - started;
    t.ok(Number.isFinite(r.longestMs) && r.longestMs >= 0 && r.longestMs <= elapsed + 20, JSON.stringify(r));
    t.ok(r.over50 <= Math.ceil(elapsed / 50), JSON.stringify({ ...r, elapsed }));
  },
);
