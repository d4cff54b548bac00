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
  await t.rejects(exitWithin(s, 'svc start left running', 300), {
    message: /^svc start left running: no exit after 300 ms\n[^]*control plane listening/,
  });
  const waited = Date.now() - started;
  t.ok(waited >= 290 && waited < 5_000, `rejected at the bound (${waited} ms)`);
  t.equal(s.exit, null, 'the child still runs');

  s.child.kill('SIGTERM');
  t.same(await exitWithin(s, 'svc start after SIGTERM'), { code: 0, signal: null }, 'a child that ends: its exit');
});
