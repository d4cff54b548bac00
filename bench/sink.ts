// Postfix's smtp-sink as the receiving side of both contenders, so what receives is identical. It
// runs with -c (a running "mesg=N" counter on stdout, updated as each "." is received), which tells us
// the moment the last message arrived, and -d (one file per message), so that afterwards we can count
// what arrived and check our MTA's DKIM signatures. The dump goes to tmpfs when there is one: on disk
// it would make the sink, not the contenders, the slow part.
import { spawn } from 'node:child_process';
import { chown, mkdtemp, readdir, rm } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { freePort, nobody, sleep, waitPort } from './util.js';

export interface Sink {
  port: number;
  /** Messages received so far (the counter smtp-sink prints). */
  count(): number;
  /** Resolves with the time (performance.now()) at which the count reached n, or rejects after timeoutMs. */
  reached(n: number, timeoutMs: number): Promise<number>;
  /** The dumped messages' file paths. */
  files(): Promise<string[]>;
  /**
   * Deletes the `n` messages dumped so far (a warm-up's: tens of thousands of them would fill tmpfs at 100 kB), once
   * all of them are written (the counter may move before a file is complete); rejects if they are not within 5 s.
   */
  clear(n: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startSink(name: string): Promise<Sink> {
  const dir = await mkdtemp(path.join(existsSync('/dev/shm') ? '/dev/shm' : os.tmpdir(), `svc-bench-sink-${name}-`));
  const user = process.getuid?.() === 0 ? nobody() : null;
  // smtp-sink refuses to run as root; it drops to -u after binding and must then write the dump.
  if (user) await chown(dir, user.uid, user.gid);
  const port = await freePort();
  const child = spawn(
    '/usr/sbin/smtp-sink',
    ['-c', '-d', `${dir}/`, ...(user ? ['-u', 'nobody'] : []), '-h', `sink-${name}.test`, `127.0.0.1:${port}`, '1024'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let count = 0;
  let stderr = '';
  const waiters: { n: number; resolve: (t: number) => void }[] = [];
  let tail = '';
  child.stdout.setEncoding('latin1').on('data', (chunk: string) => {
    // "sess=S quit=Q mesg=M\r", rewritten in place: read the complete ones, keep the partial rest.
    const text = tail + chunk;
    const end = text.lastIndexOf('\r');
    tail = text.slice(end + 1);
    const last = [...text.slice(0, Math.max(end, 0)).matchAll(/mesg=(\d+)/g)].at(-1);
    if (!last) return;
    count = Math.max(count, Number(last[1]));
    const now = performance.now();
    for (const w of waiters.splice(0)) count >= w.n ? w.resolve(now) : waiters.push(w);
  });
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  // Wait until it accepts connections (it binds before it prints anything).
  await waitPort(port, 5_000, () => (child.exitCode !== null ? `smtp-sink exited: ${stderr}` : null));

  const files = async () => (await readdir(dir)).map((f) => path.join(dir, f));
  return {
    port,
    count: () => count,
    reached(n, timeoutMs) {
      if (count >= n) return Promise.resolve(performance.now());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`sink ${name}: ${count} of ${n} messages after ${timeoutMs / 1000} s`)),
          timeoutMs,
        );
        waiters.push({ n, resolve: (t) => (clearTimeout(timer), resolve(t)) });
      });
    },
    files,
    async clear(n) {
      const deadline = performance.now() + 5_000;
      let dumped = await files();
      while (dumped.length < n && performance.now() < deadline) {
        await sleep(50);
        dumped = await files();
      }
      if (dumped.length !== n) throw new Error(`sink ${name}: ${dumped.length} messages dumped, expected ${n}`);
      for (let i = 0; i < n; i += 256) await Promise.all(dumped.slice(i, i + 256).map((f) => rm(f)));
    },
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
