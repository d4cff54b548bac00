// `svc queue` as operators run it: `node --import ./bin/resolve-sources.ts bin/svc.ts queue ...` in a child process,
// on a data directory whose spool this test fills by opening the same LMDB environment. The test keeps that
// environment open while the children run, as the service would (LMDB is shared between processes),
// and reads back what they wrote; the last case closes it first (the service stopped).
import t, { type Test } from 'tap';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { openLmdb, type LmdbEnv } from '../../storage/lmdb/env.js';
import { openSpool, type Spool, type SpoolEntry } from '../../storage/lmdb/spool.js';
import { loadConfig } from '../../config/load.js';
import { queue } from '../../bin/queue.js';
import { runSvc, type Run } from '../helpers/child.js';

function svcQueue(dataDir: string, ...args: string[]): Promise<Run> {
  return runSvc(['queue', ...args], { SVC_DATA_DIR: dataDir });
}

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-queue-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

const lines = (s: string) => s.split('\n').filter((l) => l !== '');
/** The first column of the table rows (the header excluded). */
const tableIds = (out: string) =>
  lines(out)
    .slice(1, -1)
    .map((l) => l.split(/\s+/)[0]);
const jsonLines = (out: string) => lines(out).map((l) => JSON.parse(l) as Record<string, unknown>);

const NOW = Date.now();
const MIN = 60_000;

function entry(id: string, domain: string, nextAttemptMs: number, attempts = 0): SpoolEntry {
  return {
    id,
    projectId: 'p1',
    domain,
    mailFrom: `bounce+${id}@rp.sender.test`,
    rcptTo: `user@${domain}`,
    outboundId: 'o1',
    nextAttemptMs,
    attempts,
    createdMs: NOW - 90 * MIN,
  };
}

// Schedule order: m-a1, m-c1, m-b1, m-a2.
const ENTRIES = [
  entry('m-b1', 'b.test', NOW + 60 * MIN, 2),
  entry('m-a1', 'a.test', NOW - MIN),
  entry('m-a2', 'a.test', NOW + 120 * MIN, 1),
  entry('m-c1', 'c.test', NOW + 10 * MIN),
];
const ORDER = ['m-a1', 'm-c1', 'm-b1', 'm-a2'];

/** A message with 8-bit bytes in its body: --body must hand back exactly these bytes. */
const bodyOf = (id: string) =>
  Buffer.concat([
    Buffer.from(`From: sender@sender.test\r\nTo: user@x.test\r\nSubject: message ${id}\r\n\r\nthe body of ${id}: `),
    Buffer.from([0xe9, 0x00, 0xff]),
    Buffer.from('\r\n'),
  ]);

t.test('svc queue against a spool shared with this (service-like) process', async (t) => {
  const dataDir = await tempDir(t);
  const env: LmdbEnv = await openLmdb(dataDir);
  let open = true;
  t.teardown(async () => {
    if (open) await env.close();
  });
  const spool: Spool = openSpool(env);
  // The bodies' CRs and LFs are CRLF pairs, which the sender's hint says (shown nowhere: SpoolEntry.crlfOnly).
  await Promise.all(ENTRIES.map((e) => spool.enqueue({ ...e, crlfOnly: true }, bodyOf(e.id))));
  /** Reads what a child wrote: a fresh snapshot, not this process's cached read transaction. */
  const fresh = (id: string) => {
    env.root.resetReadTxn();
    return spool.get(id);
  };

  await t.test('list, inspect and usage errors (read only, in parallel)', async (t) => {
    const [all, byDomain, json, jsonByDomain, inspect, body, inspectJson] = await Promise.all([
      svcQueue(dataDir, 'list'),
      svcQueue(dataDir, 'list', '--domain', 'A.Test.'),
      svcQueue(dataDir, 'list', '--json', '--limit', '2'),
      svcQueue(dataDir, 'list', '--json', '--domain', 'a.test', '--limit', '1'),
      svcQueue(dataDir, 'inspect', 'm-b1'),
      svcQueue(dataDir, 'inspect', 'm-b1', '--body'),
      svcQueue(dataDir, 'inspect', 'm-b1', '--json'),
    ]);

    t.equal(all.code, 0, `list exits 0 (stderr: ${all.stderr})`);
    t.match(lines(all.out)[0], /^ID\s+DOMAIN\s+RCPT\s+ATTEMPTS\s+NEXT ATTEMPT\s+AGE\s+STATE$/, 'a header row');
    t.same(tableIds(all.out), ORDER, 'every entry, in schedule order');
    t.equal(lines(all.out).at(-1), '4 shown of 4 queued', 'and the count');
    const b1 = lines(all.out).find((l) => l.startsWith('m-b1 '));
    t.match(
      b1,
      /^m-b1\s+b\.test\s+user@b\.test\s+2\s+(\S+)\s+1h3\dm\s+in 5\dm$/,
      'domain, rcpt, attempts, next attempt, age and state',
    );
    t.ok(b1?.includes(new Date(NOW + 60 * MIN).toISOString()), 'the next attempt in ISO form');
    t.match(
      lines(all.out).find((l) => l.startsWith('m-a1 ')),
      /\bdue$/,
      'an entry past its time is due',
    );
    t.equal(all.stderr, '');

    t.equal(byDomain.code, 0);
    t.same(tableIds(byDomain.out), ['m-a1', 'm-a2'], '--domain filters (case and trailing dot ignored)');
    t.equal(lines(byDomain.out).at(-1), '2 shown of 2 queued for A.Test. (4 in the queue)');

    t.equal(json.code, 0);
    const rows = jsonLines(json.out);
    t.same(
      rows.map((r) => r.id),
      ['m-a1', 'm-c1', undefined],
      '--limit 2: two entries, then the summary',
    );
    t.same(rows[2], { total: 4, matching: 4, shown: 2 });
    t.match(rows[0], {
      ...ENTRIES[1],
      nextAttempt: new Date(NOW - MIN).toISOString(),
      created: new Date(NOW - 90 * MIN).toISOString(),
    });
    t.ok(typeof rows[0]?.ageMs === 'number' && rows[0].ageMs >= 90 * MIN, 'ageMs');
    t.notOk(
      rows.some((r) => 'crlfOnly' in r),
      'the signer’s hint is not shown',
    );
    t.same(jsonLines(jsonByDomain.out), [jsonLines(jsonByDomain.out)[0], { total: 4, matching: 2, shown: 1 }]);
    t.equal(jsonLines(jsonByDomain.out)[0]?.id, 'm-a1');

    t.equal(inspect.code, 0, `inspect exits 0 (stderr: ${inspect.stderr})`);
    const fields = lines(inspect.out);
    for (const [k, v] of [
      ['id', 'm-b1'],
      ['projectId', 'p1'],
      ['domain', 'b.test'],
      ['mailFrom', 'bounce+m-b1@rp.sender.test'],
      ['rcptTo', 'user@b.test'],
      ['outboundId', 'o1'],
      ['attempts', '2'],
    ]) {
      t.ok(
        fields.some((l) => new RegExp(`^${k}:\\s+${v!.replace(/[.+]/g, '\\$&')}$`).test(l)),
        `${k}: ${v}`,
      );
    }
    t.ok(
      fields.some((l) => l.startsWith('nextAttempt:') && l.includes(new Date(NOW + 60 * MIN).toISOString())),
      'nextAttempt in ISO form',
    );
    t.ok(
      fields.some((l) => /^size:\s+\d+ bytes$/.test(l) && l.includes(String(bodyOf('m-b1').length))),
      'the size of the message',
    );
    t.ok(fields.includes('Subject: message m-b1'), 'the headers');
    t.notOk(inspect.out.includes('the body of'), 'but not the body');
    t.notOk(
      fields.some((l) => l.startsWith('cancelled:')),
      'not cancelled',
    );

    t.equal(body.code, 0);
    t.ok(body.stdout.equals(bodyOf('m-b1')), '--body: exactly the raw bytes, nothing else');
    t.equal(body.stderr, '');

    t.equal(inspectJson.code, 0);
    t.match(JSON.parse(inspectJson.out), { ...ENTRIES[0], sizeBytes: bodyOf('m-b1').length });
    t.notOk('crlfOnly' in JSON.parse(inspectJson.out), 'inspect does not show the hint either');
  });

  await t.test('unknown ids exit 1, bad usage 2: one line on stderr, nothing on stdout', async (t) => {
    // Through the real command for a few; the whole matrix in-process (the same function, no spawn).
    const children: [string[], RegExp, number][] = [
      [['inspect', 'nope'], /^svc queue: no queued message "nope"/, 1],
      [[], /^svc queue: which subcommand\?/, 2],
      [['list', '--limit', 'ten'], /^svc queue list: --limit must be a whole number/, 2],
    ];
    const inProcess: [string[], RegExp, number][] = [
      [['inspect', 'nope', '--body'], /^svc queue: no queued message "nope"/, 1],
      [['retry', 'nope'], /^svc queue: no queued message "nope"/, 1],
      [['delete', 'nope'], /^svc queue: no queued message "nope"/, 1],
      [['frobnicate'], /^svc queue: unknown subcommand "frobnicate"/, 2],
      [['list', '--limit=-1'], /^svc queue list: --limit must be a whole number/, 2],
      [['list', '--limit', '-1'], /^svc queue list: Option '--limit' argument is ambiguous\. Did you forget/, 2],
      [['list', '--colour'], /^svc queue list: Unknown option '--colour'/, 2],
      [['list', 'extra'], /^svc queue list: list takes no argument/, 2],
      [['list', '--domain'], /^svc queue list: Option '--domain <value>' argument missing/, 2],
      [['inspect'], /^svc queue inspect: inspect takes exactly one message id/, 2],
      [['inspect', 'm-a1', '--body', '--json'], /--body or --json/, 2],
      [['retry'], /^svc queue retry: retry \(or --all\) takes exactly one message id/, 2],
      [['retry', 'm-a1', '--all'], /a message id or --all, not both/, 2],
      [['retry', 'm-a1', '--domain', 'a.test'], /--domain goes with retry --all/, 2],
      [['delete', 'm-a1', 'm-a2'], /^svc queue delete: delete takes exactly one message id/, 2],
    ];
    const runs = await Promise.all(children.map(([args]) => svcQueue(dataDir, ...args)));
    for (const [i, [args, message, exit]] of children.entries()) {
      const r = runs[i]!;
      const what = `svc queue ${args.join(' ')}`;
      t.equal(r.code, exit, `${what}: exit ${exit}`);
      t.equal(lines(r.stderr).length, 1, `${what}: one stderr line (${JSON.stringify(r.stderr)})`);
      t.match(r.stderr, message, `${what}: says why`);
      t.equal(r.out, '', `${what}: nothing on stdout`);
    }
    const config = loadConfig({ SVC_DATA_DIR: dataDir });
    for (const [args, message, exit] of inProcess) {
      const out: string[] = [];
      const err: string[] = [];
      const code = await queue(args, config, {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
        raw: (b) => out.push(String(b)),
      });
      const what = `svc queue ${args.join(' ')}`;
      t.equal(code, exit, `${what}: exit ${exit}`);
      t.equal(err.length, 1, `${what}: one stderr line`);
      t.notOk(err[0]?.includes('\n'), `${what}: a single line`);
      t.match(err[0], message, `${what}: says why (${err[0]})`);
      t.same(out, [], `${what}: nothing on stdout`);
    }
    env.root.resetReadTxn();
    t.same(
      spool.list(10),
      ORDER.map((id) => ({ ...ENTRIES.find((e) => e.id === id), crlfOnly: true })),
      'nothing changed',
    );
  });

  await t.test('retry makes an entry due now; --all --domain only that domain', async (t) => {
    const before = Date.now();
    const [one, all] = await Promise.all([
      svcQueue(dataDir, 'retry', 'm-a2'),
      svcQueue(dataDir, 'retry', '--all', '--domain', 'b.test'),
    ]);
    const after = Date.now();
    t.equal(one.code, 0, `retry exits 0 (stderr: ${one.stderr})`);
    t.match(one.out, /^m-a2: due now \(/);
    t.equal(all.code, 0, `retry --all exits 0 (stderr: ${all.stderr})`);
    t.equal(all.out.trim().split(' (')[0], '1 message for b.test due now');
    for (const id of ['m-a2', 'm-b1']) {
      const e = fresh(id);
      t.ok(
        e && e.nextAttemptMs >= before && e.nextAttemptMs <= after,
        `${id}: next attempt is now (${e?.nextAttemptMs})`,
      );
      t.equal(e?.attempts, ENTRIES.find((x) => x.id === id)?.attempts, `${id}: attempts unchanged`);
    }
    t.equal(fresh('m-c1')?.nextAttemptMs, NOW + 10 * MIN, 'another domain is untouched');
    t.same(
      spool
        .due(after, 10)
        .map((e) => e.id)
        .sort(),
      ['m-a1', 'm-a2', 'm-b1'],
      'due to this process too',
    );
    t.equal(spool.count(), 4, 'moved, not copied');
  });

  await t.test('delete cancels: cancelledMs set, due now, still spooled; retry keeps it cancelled', async (t) => {
    const before = Date.now();
    const del = await svcQueue(dataDir, 'delete', 'm-c1');
    const after = Date.now();
    t.equal(del.code, 0, `delete exits 0 (stderr: ${del.stderr})`);
    t.match(del.out, /^m-c1: cancelled at \S+; the MTA records it failed \("cancelled by operator"\)/);
    const e = fresh('m-c1');
    t.ok(
      e?.cancelledMs !== undefined && e.cancelledMs >= before && e.cancelledMs <= after,
      `cancelledMs is now (${e?.cancelledMs})`,
    );
    t.equal(e?.nextAttemptMs, e?.cancelledMs, 'due at the cancellation');
    t.ok(spool.body('m-c1')?.equals(bodyOf('m-c1')), 'the body is kept for the worker');
    t.equal(spool.count(), 4, 'not removed');

    // Cancelling again (in-process: the same function the command runs) keeps the first time.
    const said: string[] = [];
    t.equal(
      await queue(['delete', 'm-c1'], loadConfig({ SVC_DATA_DIR: dataDir }), {
        out: (l) => said.push(l),
        err: (l) => said.push(l),
        raw: () => {},
      }),
      0,
    );
    t.match(said, [/^m-c1: already cancelled at /]);

    const [retried, list, inspect] = await Promise.all([
      svcQueue(dataDir, 'retry', 'm-c1'),
      svcQueue(dataDir, 'list'),
      svcQueue(dataDir, 'inspect', 'm-c1'),
    ]);
    t.equal(retried.code, 0);
    t.match(retried.out, /^m-c1: due now .*; still cancelled$/m);
    t.equal(fresh('m-c1')?.cancelledMs, e?.cancelledMs, 'the first cancellation time stays, through retry');
    t.match(
      lines(list.out).find((l) => l.startsWith('m-c1 ')),
      /\bcancelled$/,
      'list shows it cancelled',
    );
    t.ok(
      lines(inspect.out).some((l) => l.startsWith('cancelled:') && l.includes(new Date(e!.cancelledMs!).toISOString())),
      'inspect shows when',
    );
  });

  await t.test('with the environment closed (service stopped) it works the same', async (t) => {
    await env.close();
    open = false;
    const [list, del] = await Promise.all([svcQueue(dataDir, 'list', '--json'), svcQueue(dataDir, 'delete', 'm-a1')]);
    t.equal(list.code, 0, list.stderr);
    t.same(jsonLines(list.out).at(-1), { total: 4, matching: 4, shown: 4 });
    t.equal(del.code, 0, del.stderr);
    const reopened = await openLmdb(dataDir);
    try {
      t.type(openSpool(reopened).get('m-a1')?.cancelledMs, 'number', 'the cancellation is on disk');
    } finally {
      await reopened.close();
    }
  });
});

t.test('no spool under SVC_DATA_DIR: exit 1, and nothing is created', async (t) => {
  const dataDir = await tempDir(t);
  const r = await svcQueue(path.join(dataDir, 'missing'), 'list');
  t.equal(r.code, 1);
  t.match(r.stderr, /^svc queue: no spool at \S+missing\/lmdb \(set SVC_DATA_DIR/);
  t.equal(lines(r.stderr).length, 1);
  await t.rejects(stat(path.join(dataDir, 'missing')), 'no directory was made');
});
