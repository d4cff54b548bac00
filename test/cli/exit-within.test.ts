// exitWithin (test/helpers/child.ts), which every wait on an `svc` child's exit goes through: a child that does not
// end fails the wait within the bound, naming the step and carrying what the child printed (tap's own timeout says
// nothing of where a file hung); a child that ends gives its exit.
import t from 'tap';
import { exitWithin, listenEnv, listening, svc, tempDir } from '../helpers/child.js';

t.test('a child that does not end fails the wait within the bound, with its step and output', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['start'], listenEnv(dataDir));
  await listening(s);
  const started = Date.now();
  const err = await exitWithin(s, 'svc start left running', 300).then(
    () => null,
    (e: Error) => e,
  );
  t.match(
    err?.message,
    /^svc start left running: no exit after 300 ms \(threads: [^)]*\)\n[^]*control plane listening/,
  );
  // Each thread: its id, name, state and wait channel (an idle service's main thread mostly sleeps in its event
  // loop's epoll wait, but a timer may have it running at the moment of reading; kernels name the waits differently).
  t.match(err?.message, /\(threads: \d+ \S+ [RSD] \S+; \d+ /, 'its threads, one by one');
  const waited = Date.now() - started;
  t.ok(waited >= 290 && waited < 5_000, `rejected at the bound (${waited} ms)`);
  t.equal(s.exit, null, 'the child still runs');

  s.child.kill('SIGTERM');
  t.same(await exitWithin(s, 'svc start after SIGTERM'), { code: 0, signal: null }, 'a child that ends: its exit');
});
