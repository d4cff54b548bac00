// The helper that runs one `svc` command for the CLI tests (test/helpers/child.ts runSvc): a command that outlives
// its deadline is killed, and its stderr then says where each of its threads waited, so that a rare hang fails its
// test with that, not with an exit code alone.
import t from 'tap';
import { runSvc, threadStates } from '../helpers/child.js';

t.test('a command past its deadline is killed, and its stderr names its threads and where they waited', async (t) => {
  // 50 ms: the command is still starting (loading its modules), so it is killed with certainty.
  const run = await runSvc(['queue', 'help'], { SVC_DATA_DIR: '/nonexistent-svc-run-dir' }, 50);
  t.equal(run.code, null, 'killed: no exit code');
  t.match(run.stderr, /\[svc queue help: no exit after 50 ms; threads: \d+ \S.* [RSDTtZI] /);
});

t.test('one that ends in time gives its code and output, and nothing is added to them', async (t) => {
  const run = await runSvc(['queue', 'bounce'], { SVC_DATA_DIR: '/nonexistent-svc-run-dir' });
  t.equal(run.code, 2);
  t.equal(run.stderr.trimEnd(), 'svc queue bounce: bounce (or --domain) takes exactly one message id');
  t.equal(run.out, '');
});

t.test('threadStates: this process, thread by thread, and a pid that is gone', async (t) => {
  const states = threadStates(process.pid).split('; ');
  t.ok(states.length >= 1);
  t.match(states[0], new RegExp(`^${process.pid} \\S+ R `), 'the main thread runs (it is reading this)');
  t.match(threadStates(2 ** 22 + 1), /^no \/proc entry/);
  t.equal(threadStates(undefined), 'no pid');
});
