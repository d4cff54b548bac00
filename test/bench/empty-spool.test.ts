// bench/util.ts's emptySpool, which phase 3 of bench/run.ts and bench/accept-alone.ts run beside a control that
// delivers nothing, so that each load's messages do not stay spooled: every entry and body goes, in slices, while
// another process's environment (here, another open in this one) stays open on the same directory.
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import t from 'tap';
import { emptySpool } from '../../bench/util.js';
import { openLmdb } from '../../storage/lmdb/env.js';
import { openSpool, type SpoolEntry } from '../../storage/lmdb/spool.js';

const entry = (id: string): SpoolEntry => ({
  id,
  projectId: 'p1',
  domain: 'dest.test',
  mailFrom: `bounce+${id}@rp.sender.test`,
  rcptTo: 'user@dest.test',
  outboundId: 'o1',
  nextAttemptMs: 1_000,
  attempts: 0,
  createdMs: 1_000,
});

t.test('every entry and body goes, more than one slice of them, beside an environment left open', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-empty-spool-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const env = await openLmdb(dir);
  t.teardown(() => env.close());
  const spool = openSpool(env);
  // Over one write transaction's slice (1,000), so that the slicing is crossed.
  const n = 2_345;
  await spool.enqueueMany(
    Array.from({ length: n }, (_, i) => ({ entry: entry(`m${i}`), body: Buffer.from(`Subject: ${i}\r\n\r\nx\r\n`) })),
  );
  t.equal(spool.count(), n);

  t.equal(await emptySpool(dir), n, 'says how many it removed');
  t.equal(spool.count(), 0, 'no entry left, as the open environment sees it');
  t.equal(spool.body('m0'), undefined, 'the first body gone');
  t.equal(spool.body(`m${n - 1}`), undefined, 'and the last');
  t.equal(await emptySpool(dir), 0, 'an empty spool: nothing to do');

  // The spool still works for the process that kept it open.
  await spool.enqueue(entry('after'), Buffer.from('Subject: after\r\n\r\ny\r\n'));
  t.same(
    spool.list(10).map((e) => e.id),
    ['after'],
  );
});
