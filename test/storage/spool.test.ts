// The outbound spool on a real LMDB environment in a temp directory: the contract of storage/lmdb/spool.ts,
// group commit, and the crash guarantee (issue 5, item 3): kill -9 loses no acknowledged message.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openLmdb, type LmdbEnv } from '../../storage/lmdb/env.js';
import {
  HELD_RECHECK_MS,
  openSpool,
  type Spool,
  type SpoolEntry,
  type SpoolOptions,
} from '../../storage/lmdb/spool.js';
import { currentOwner, processAlive, type LeaseOwner } from '../../storage/lmdb/lease-owner.js';
import { crashBody, crashSeq } from './spool-crash-child.js';
import { FROM_SOURCES } from '../helpers/from-sources.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, '../..');
const CHILD = path.join(HERE, 'spool-crash-child.ts');

async function tempDir(t: Test): Promise<string> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-spool-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

async function open(t: Test, dir: string, opts: SpoolOptions = {}): Promise<{ env: LmdbEnv; spool: Spool }> {
  const env = await openLmdb(dir);
  let closed = false;
  const close = env.close;
  env.close = async () => {
    if (closed) return;
    closed = true;
    await close();
  };
  t.teardown(() => env.close());
  return { env, spool: openSpool(env, opts) };
}

// A process of this boot and pid namespace that cannot exist: above the largest pid_max Linux allows (2^22).
const GONE: LeaseOwner = { ...currentOwner(), pid: 4_194_305, start: '1' };

function entry(id: string, domain: string, nextAttemptMs: number, extra: Partial<SpoolEntry> = {}): SpoolEntry {
  return {
    id,
    projectId: 'p1',
    domain,
    mailFrom: `bounce+${id}@rp.sender.test`,
    rcptTo: `user@${domain}`,
    outboundId: 'o1',
    nextAttemptMs,
    attempts: 0,
    createdMs: 1_000,
    ...extra,
  };
}

const bodyOf = (id: string) => Buffer.from(`Subject: ${id}\r\n\r\nbody of ${id}\r\n`);
const ids = (entries: SpoolEntry[]) => entries.map((e) => e.id);

t.test('enqueue, then get and body by id', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  const e = entry('m1', 'example.test', 5_000, { attempts: 2 });
  await spool.enqueue(e, bodyOf('m1'));
  t.same(spool.get('m1'), e, 'get returns the entry as enqueued');
  t.same(spool.body('m1'), bodyOf('m1'), 'body returns the bytes as enqueued');
  t.ok(Buffer.isBuffer(spool.body('m1')), 'as a Buffer');
  t.equal(spool.get('nope'), undefined, 'unknown id: no entry');
  t.equal(spool.body('nope'), undefined, 'unknown id: no body');
  t.equal(spool.count(), 1);

  // A body larger than a page (overflow pages) comes back intact, and reading another key after it
  // does not disturb the first buffer.
  const big = Buffer.alloc(200_000);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
  await spool.enqueue(entry('m2', 'example.test', 5_000), big);
  const got = spool.body('m2');
  spool.body('m1');
  t.ok(got && got.equals(big), 'a 200 kB body round-trips');

  // Extra properties on the caller's object are not stored.
  await spool.enqueue({ ...entry('m3', 'example.test', 5_000), secret: 'x' } as SpoolEntry, bodyOf('m3'));
  t.notOk('secret' in (spool.get('m3') ?? {}), 'only the contract fields are stored');
});

t.test('withBody lends the stored bytes; bodyAfter puts a prefix before them in one buffer', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  // A small body is lent in lmdb-js's reusable read buffer, longer than the body; a large one may be lent otherwise.
  const big = Buffer.alloc(200_000);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7) & 0xff;
  await spool.enqueue(entry('big', 'example.test', 5_000), big);
  await spool.enqueue(entry('small', 'example.test', 5_000), bodyOf('small'));
  const prefix = Buffer.from('DKIM-Signature: x\r\n');
  for (const [id, body] of [
    ['small', bodyOf('small')],
    ['big', big],
    // Read after the large one: the reusable buffer is no shorter than before, the view still the body's own.
    ['small', bodyOf('small')],
  ] as const) {
    const lent = spool.withBody(id, (b) => ({
      equal: b.equals(body),
      length: b.length,
      // What subarray, indexOf and Buffer.concat read: the view's own length, not a property over it.
      tail: b.subarray(b.length - 4).toString('latin1'),
      lastLf: b.lastIndexOf(0x0a),
    }));
    t.same(
      lent,
      {
        equal: true,
        length: body.length,
        tail: body.subarray(body.length - 4).toString('latin1'),
        lastLf: body.lastIndexOf(0x0a),
      },
      `${id}: the stored bytes, and no more`,
    );
    const joined = spool.bodyAfter(id, prefix);
    t.ok(joined?.equals(Buffer.concat([prefix, body])), `${id}: the prefix, then the body`);
    // A copy: what the next read lends does not change it.
    spool.withBody(id === 'big' ? 'small' : 'big', () => undefined);
    t.ok(joined?.equals(Buffer.concat([prefix, body])), `${id}: kept after another read`);
  }
  t.equal(
    spool.withBody('nope', () => t.fail('not called')),
    undefined,
    'unknown id: undefined, use not called',
  );
  t.equal(spool.bodyAfter('nope', prefix), undefined);
});

t.test('enqueue refuses keys that would break key order, and writes nothing', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await t.rejects(spool.enqueue(entry('a\0b', 'example.test', 1), bodyOf('x')), TypeError);
  await t.rejects(spool.enqueue(entry('m1', 'exa\0mple.test', 1), bodyOf('x')), TypeError);
  await t.rejects(spool.enqueue(entry('', 'example.test', 1), bodyOf('x')), TypeError);
  await t.rejects(spool.enqueue(entry('m1', 'example.test', Number.NaN), bodyOf('x')), TypeError);
  await t.rejects(spool.enqueue(entry('m1', 'x'.repeat(2_000), 1), bodyOf('x')), RangeError);
  t.equal(spool.count(), 0);
  t.equal(spool.body('m1'), undefined);
});

t.test('enqueueing an id again replaces it: one queue key, never two', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('m1', 'a.test', 100), bodyOf('m1'));
  await spool.enqueue(entry('m1', 'a.test', 300), bodyOf('m1'));
  t.equal(spool.count(), 1);
  t.same(ids(spool.due(200, 10)), [], 'the old key is gone');
  t.same(ids(spool.due(300, 10)), ['m1']);
});

// The same rule for a leased entry, for enqueueMany, and for two enqueues of one id in the same event turn (one
// LMDB transaction).
t.test('enqueue and enqueueMany over ids spooled, leased, and given twice at once', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('old', 'a.test', 100), bodyOf('old v1'));
  t.equal((await spool.lease(100, 10, 1_000))[0]?.id, 'old', 'leased');
  await Promise.all([
    spool.enqueue(entry('twice', 'a.test', 400), bodyOf('twice v1')),
    spool.enqueue(entry('twice', 'b.test', 500), bodyOf('twice v2')),
  ]);
  await spool.enqueueMany([
    { entry: entry('old', 'b.test', 300), body: bodyOf('old v2') },
    { entry: entry('new', 'c.test', 200), body: bodyOf('new') },
  ]);
  t.equal(spool.count(), 3, 'one queue key per id');
  t.same(ids(spool.due(1_000, 10)), ['new', 'old', 'twice']);
  t.equal(spool.get('old')?.domain, 'b.test', 'the replaced entry');
  t.equal(spool.body('old')?.toString(), bodyOf('old v2').toString(), 'its new body');
  t.same(ids(spool.due(250, 10)), ['new'], 'the old key is gone');
  t.equal(spool.get('twice')?.domain, 'b.test', 'the later of two enqueues in one turn');
  t.equal(spool.body('twice')?.toString(), bodyOf('twice v2').toString());
  t.same(ids(await spool.lease(1_000, 10, 1_000)), ['new', 'old', 'twice'], 'the replaced entry is no longer leased');
});

t.test('due: oldest first, then by domain, then by id', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  const entries = [
    entry('m5', 'b.test', 200),
    entry('m1', 'z.test', 100),
    entry('m4', 'a.test', 200),
    entry('m2', 'b.test', 100),
    entry('m3', 'a.test', 100),
    entry('m6', 'a.test', 200),
    entry('m0', 'a.test', 50),
  ];
  await Promise.all(entries.map((e) => spool.enqueue(e, bodyOf(e.id))));
  t.same(ids(spool.due(1_000, 100)), ['m0', 'm3', 'm2', 'm1', 'm4', 'm6', 'm5']);
  t.same(ids(spool.due(1_000, 3)), ['m0', 'm3', 'm2'], 'limit keeps the oldest');
  t.same(spool.due(1_000, 0), [], 'limit 0');
});

t.test('due excludes entries not yet due', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('past', 'a.test', 900), bodyOf('past'));
  await spool.enqueue(entry('now', 'z.test', 1_000), bodyOf('now'));
  await spool.enqueue(entry('soon', 'a.test', 1_000.5), bodyOf('soon'));
  await spool.enqueue(entry('later', 'a.test', 1_001), bodyOf('later'));
  await spool.enqueue(entry('tomorrow', 'a.test', 86_401_000), bodyOf('tomorrow'));
  t.same(ids(spool.due(899, 10)), [], 'nothing before the first');
  t.same(ids(spool.due(1_000, 10)), ['past', 'now'], 'an entry due exactly now is included; later ones are not');
  t.same(ids(spool.due(1_001, 10)), ['past', 'now', 'soon', 'later']);
});

t.test('reschedule moves an entry: not due before its new time, same body, one key', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('m1', 'a.test', 100), bodyOf('m1'));
  await spool.enqueue(entry('m2', 'a.test', 150), bodyOf('m2'));
  await spool.reschedule('m1', 500, 1);

  t.same(ids(spool.due(100, 10)), [], 'no longer due at its old time');
  t.same(ids(spool.due(499, 10)), ['m2'], 'nor just before its new time');
  t.same(ids(spool.due(500, 10)), ['m2', 'm1'], 'due at its new time, after older entries');
  t.same(spool.get('m1'), entry('m1', 'a.test', 500, { attempts: 1 }), 'get sees the new time and attempts');
  t.equal(spool.count(), 2, 'the old key was removed, not copied');
  t.same(spool.body('m1'), bodyOf('m1'), 'the body is untouched');

  await spool.reschedule('m1', 50);
  t.same(spool.get('m1')?.attempts, 1, 'attempts unchanged when not given');
  t.same(ids(spool.due(60, 10)), ['m1'], 'and it can move earlier ("retry now")');

  await spool.reschedule('ghost', 10);
  t.equal(spool.get('ghost'), undefined, 'rescheduling an unknown id creates nothing');
  t.equal(spool.count(), 2);
});

t.test('concurrent reschedules of one id leave exactly one key', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('m1', 'a.test', 100), bodyOf('m1'));
  await Promise.all([spool.reschedule('m1', 300), spool.reschedule('m1', 200), spool.reschedule('m1', 400, 3)]);
  t.equal(spool.count(), 1);
  t.same(spool.list(10), [entry('m1', 'a.test', 400, { attempts: 3 })], 'the last call wins, in call order');
});

t.test('remove deletes the entry, its index and its body', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('m1', 'a.test', 100), bodyOf('m1'));
  await spool.enqueue(entry('m2', 'a.test', 100), bodyOf('m2'));
  await spool.remove('m1');
  t.equal(spool.get('m1'), undefined);
  t.equal(spool.body('m1'), undefined, 'the body is gone too');
  t.same(ids(spool.due(1_000, 10)), ['m2']);
  t.equal(spool.count(), 1);
  await spool.remove('m1');
  await spool.remove('never');
  t.equal(spool.count(), 1, 'removing an unknown id is a no-op');
  // A reschedule racing a remove does not resurrect the entry.
  await Promise.all([spool.remove('m2'), spool.reschedule('m2', 5)]);
  t.equal(spool.get('m2'), undefined);
  t.equal(spool.count(), 0);
});

t.test('list in key order, and count', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  t.same(spool.list(10), []);
  t.equal(spool.count(), 0);
  await Promise.all([
    spool.enqueue(entry('c', 'b.test', 300), bodyOf('c')),
    spool.enqueue(entry('a', 'a.test', 100), bodyOf('a')),
    spool.enqueue(entry('b', 'a.test', 9_999_999_999_999), bodyOf('b')),
    spool.enqueue(entry('d', 'a.test', 300), bodyOf('d')),
  ]);
  t.same(ids(spool.list(10)), ['a', 'd', 'c', 'b'], 'future entries are listed too, by time');
  t.same(ids(spool.list(2)), ['a', 'd']);
  t.same(spool.list(0), []);
  t.equal(spool.count(), 4);
});

t.test('lease: takes due entries and moves them in one durable step', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await Promise.all(['m1', 'm2', 'm3'].map((id, i) => spool.enqueue(entry(id, 'a.test', 100 + i), bodyOf(id))));
  await spool.enqueue(entry('future', 'a.test', 100_000), bodyOf('future'));

  const leased = await spool.lease(1_000, 2, 61_000);
  t.same(ids(leased), ['m1', 'm2'], 'oldest first, at most limit');
  t.same(
    leased.map((e) => e.nextAttemptMs),
    [61_000, 61_000],
    'returned with their lease time',
  );
  t.same(ids(spool.due(1_000, 10)), ['m3'], 'leased entries are no longer due');
  t.equal(spool.get('m1')?.nextAttemptMs, 61_000);
  t.equal(spool.get('m1')?.attempts, 0, 'a lease is not an attempt');
  t.equal(spool.count(), 4);

  // Overlapping leases never hand out the same entry twice.
  await Promise.all(
    Array.from({ length: 20 }, (_, i) => spool.enqueue(entry(`n${i}`, 'b.test', 200), bodyOf(`n${i}`))),
  );
  const rounds = await Promise.all(Array.from({ length: 8 }, () => spool.lease(1_000, 4, 61_000)));
  const all = rounds.flatMap(ids);
  t.equal(all.length, 21, 'every due entry leased once (m3 and n0..n19)');
  t.equal(new Set(all).size, all.length, 'no entry leased twice');
  t.same(ids(spool.due(60_999, 10)), [], 'nothing due until the lease ends');
  t.same(ids(await spool.lease(60_999, 10, 70_000)), []);
});

t.test('cancel marks the entry cancelled and makes it due now, durably', async (t) => {
  const dir = await tempDir(t);
  const first = await open(t, dir);
  await first.spool.enqueue(entry('m1', 'a.test', 90_000, { attempts: 3 }), bodyOf('m1'));
  await first.spool.enqueue(entry('m2', 'a.test', 500), bodyOf('m2'));
  t.notOk('cancelledMs' in (first.spool.get('m1') ?? {}), 'an entry never cancelled has no cancelledMs at all');

  t.equal(await first.spool.cancel('m1', 1_000), true, 'resolves true for a spooled id');
  t.same(
    first.spool.get('m1'),
    entry('m1', 'a.test', 1_000, { attempts: 3, cancelledMs: 1_000 }),
    'cancelledMs set, due at nowMs, attempts kept',
  );
  t.same(ids(first.spool.due(1_000, 10)), ['m2', 'm1'], 'due now, in key order');
  t.equal(first.spool.count(), 2, 'moved, not copied: still one key');
  t.same(first.spool.body('m1'), bodyOf('m1'), 'the body is kept for the worker');

  t.equal(await first.spool.cancel('m1', 2_000), true, 'cancelling again is fine');
  t.equal(first.spool.get('m1')?.cancelledMs, 1_000, 'and keeps the first cancellation time');
  t.equal(first.spool.get('m1')?.nextAttemptMs, 2_000, 'while making it due at the new time');
  await first.env.close();

  const { spool } = await open(t, dir);
  t.same(
    spool.get('m1'),
    entry('m1', 'a.test', 2_000, { attempts: 3, cancelledMs: 1_000 }),
    'survives close and reopen',
  );
  t.notOk('cancelledMs' in (spool.get('m2') ?? {}), 'the other entry is untouched');
});

t.test('cancelledMs is kept by reschedule ("retry") and by lease', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('m1', 'a.test', 100), bodyOf('m1'));
  await spool.cancel('m1', 200);
  await spool.reschedule('m1', 5_000, 2);
  t.same(spool.get('m1'), entry('m1', 'a.test', 5_000, { attempts: 2, cancelledMs: 200 }), 'reschedule keeps it');
  await spool.reschedule('m1', 300);
  const leased = await spool.lease(1_000, 10, 61_000);
  t.same(
    leased,
    [entry('m1', 'a.test', 61_000, { attempts: 2, cancelledMs: 200 })],
    'the leased entry carries cancelledMs',
  );
  t.equal(spool.get('m1')?.cancelledMs, 200, 'and so does the stored one');

  // enqueue stores cancelledMs as a contract field (and checks it like the other times).
  await spool.enqueue(entry('m2', 'a.test', 100, { cancelledMs: 50 }), bodyOf('m2'));
  t.equal(spool.get('m2')?.cancelledMs, 50);
  await t.rejects(spool.enqueue(entry('m3', 'a.test', 100, { cancelledMs: Number.NaN }), bodyOf('m3')), TypeError);
  t.equal(spool.get('m3'), undefined);
});

t.test('crlfOnly is stored when given (true only), and kept by reschedule, cancel and lease', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('m1', 'a.test', 100, { crlfOnly: true }), bodyOf('m1'));
  await spool.enqueue({ ...entry('m2', 'a.test', 100), crlfOnly: 'yes' } as unknown as SpoolEntry, bodyOf('m2'));
  t.equal(spool.get('m1')?.crlfOnly, true, 'stored');
  t.notOk(spool.get('m2') && 'crlfOnly' in spool.get('m2')!, 'anything but true is not stored');
  await spool.reschedule('m1', 5_000, 1);
  t.equal(spool.get('m1')?.crlfOnly, true, 'kept by reschedule');
  await spool.cancel('m1', 200);
  t.equal(spool.get('m1')?.crlfOnly, true, 'kept by cancel');
  const leased = await spool.lease(1_000, 10, 61_000);
  t.same(
    leased.find((e) => e.id === 'm1'),
    entry('m1', 'a.test', 61_000, { attempts: 1, cancelledMs: 200, crlfOnly: true }),
    'and by lease',
  );
});

t.test('cancel resolves false for an id that is not spooled, and creates nothing', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  t.equal(await spool.cancel('ghost', 1_000), false, 'never spooled');
  await spool.enqueue(entry('m1', 'a.test', 100), bodyOf('m1'));
  await spool.remove('m1');
  t.equal(await spool.cancel('m1', 1_000), false, 'removed (delivered) already');
  t.equal(spool.count(), 0);
  t.equal(spool.get('m1'), undefined);
  await t.rejects(spool.cancel('m1', Number.NaN), TypeError, 'nowMs must be a number');

  // A cancel queued right after a remove (the worker delivering it meanwhile) does not resurrect it.
  await spool.enqueue(entry('m2', 'a.test', 100), bodyOf('m2'));
  const [, cancelled] = await Promise.all([spool.remove('m2'), spool.cancel('m2', 1_000)]);
  t.equal(cancelled, false);
  t.equal(spool.get('m2'), undefined);
  t.equal(spool.count(), 0);
});

t.test('entries walks every entry in key order, lazily', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  t.same([...spool.entries()], []);
  await Promise.all([
    spool.enqueue(entry('c', 'b.test', 300), bodyOf('c')),
    spool.enqueue(entry('a', 'a.test', 100), bodyOf('a')),
    spool.enqueue(entry('d', 'a.test', 300), bodyOf('d')),
  ]);
  t.same(ids([...spool.entries()]), ['a', 'd', 'c']);
  const first: string[] = [];
  for (const e of spool.entries()) {
    first.push(e.id);
    break;
  }
  t.same(first, ['a'], 'an abandoned walk is fine');
  t.same([...spool.entries()], spool.list(10), 'the same entries as list');
});

t.test(
  'recoverLeases: after a restart, leased entries are due at once; rescheduled and removed ones are not leases',
  async (t) => {
    const dir = await tempDir(t);
    // The first MTA process, now gone (the kernel's own check, lease-owner.ts, says so).
    const first = await open(t, dir, { owner: GONE });
    for (const id of ['a', 'b', 'c', 'd']) await first.spool.enqueue(entry(id, 'a.test', 100), bodyOf(id));
    await first.spool.enqueue(entry('later', 'a.test', 50_000), bodyOf('later'));
    t.same(ids(await first.spool.lease(1_000, 4, 600_000)), ['a', 'b', 'c', 'd']);
    await first.spool.reschedule('b', 90_000, 1); // its attempt finished: deferred, no longer a lease
    await first.spool.remove('c'); // delivered
    await first.env.close(); // the process dies with a and d in flight

    const { spool } = await open(t, dir);
    t.same(ids(spool.due(2_000, 10)), [], 'before recovery the leases hold them back');
    t.equal(await spool.recoverLeases(2_000), 2);
    t.same(ids(spool.due(2_000, 10)), ['a', 'd'], 'the interrupted deliveries are due now');
    t.equal(spool.get('b')?.nextAttemptMs, 90_000, 'a deferral keeps its time');
    t.equal(spool.get('later')?.nextAttemptMs, 50_000);
    t.equal(spool.get('a')?.attempts, 0);
    t.equal(await spool.recoverLeases(3_000), 0, 'recovered once');
  },
);

t.test('recoverLeases: several processes on one spool take back only the leases of owners that are gone', async (t) => {
  const dir = await tempDir(t);
  const me = await open(t, dir);
  const self = currentOwner();
  // Other processes on the same environment, as their spools would name them.
  const sibling: LeaseOwner = { ...self, pid: 101, start: '5000' };
  const dead: LeaseOwner = { ...self, pid: 102, start: '6000' };
  const siblingSpool = openSpool(me.env, { owner: sibling });
  const deadSpool = openSpool(me.env, { owner: dead });
  for (let i = 0; i < 9; i++) await me.spool.enqueue(entry(`m${i}`, 'a.test', 100 + i), bodyOf(`m${i}`));
  t.same(ids(await me.spool.lease(1_000, 2, 600_000)), ['m0', 'm1'], 'this process leases two');
  t.same(ids(await siblingSpool.lease(1_000, 2, 600_000)), ['m2', 'm3'], 'a live sibling two');
  t.same(ids(await deadSpool.lease(1_000, 2, 600_000)), ['m4', 'm5'], 'a process since killed two');
  // A lease as an earlier version wrote it: the lease end alone.
  t.same(ids(await me.spool.lease(1_000, 1, 600_000)), ['m6']);
  await me.env.root.openDB<number, string>({ name: 'leases' }).put('m6', 600_000);

  const asked: LeaseOwner[] = [];
  const isAlive = (o: LeaseOwner) => {
    asked.push(o);
    return o.pid === sibling.pid;
  };
  t.equal(await me.spool.recoverLeases(2_000, isAlive), 3, 'the dead owner’s two and the ownerless one');
  t.same(ids(me.spool.due(2_000, 10)), ['m7', 'm8', 'm4', 'm5', 'm6'], 'taken back: due now (after the never-leased)');
  for (const id of ['m0', 'm1', 'm2', 'm3']) t.equal(me.spool.get(id)?.nextAttemptMs, 600_000, `${id} still leased`);
  t.same(
    asked.map((o) => o.pid).sort(),
    [101, 102],
    'each other owner asked about once; this process never (its leases are in flight here)',
  );
  t.equal(await me.spool.recoverLeases(3_000, isAlive), 0, 'nothing more while the sibling lives');
  t.equal(
    await me.spool.holdUnsent('m2', { moveToMs: 9_000 }),
    'started',
    'a sibling’s lease is a lease to holdUnsent',
  );

  // The sibling dies too: the next process to start takes its leases; a process restarted under another
  // owner takes this one's.
  const next = openSpool(me.env, { owner: { ...self, pid: 103, start: '7000' } });
  t.equal(await next.recoverLeases(4_000, (o) => o.pid === 103), 4, 'the sibling’s two and the old process’s two');
  t.same(ids(next.due(4_000, 10)).sort(), ['m0', 'm1', 'm2', 'm3', 'm4', 'm5', 'm6', 'm7', 'm8']);
});

t.test('the kernel’s answer: alive, exited, a reused pid, another boot, another pid namespace', async (t) => {
  const self = currentOwner();
  t.ok(self.start && self.boot && self.pidns, 'this Linux names its processes fully');
  const alive = processAlive(self);
  t.ok(alive(self), 'this process');
  const child = spawn(process.execPath, ['-e', 'setTimeout(() => {}, 60_000)'], { stdio: 'ignore' });
  t.teardown(() => child.kill('SIGKILL'));
  const pid = child.pid!;
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const start = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]!;
  const owner: LeaseOwner = { ...self, pid, start };
  t.ok(alive(owner), 'a running sibling');
  t.notOk(alive({ ...owner, start: String(Number(start) - 1) }), 'its pid, another start time: the pid was reused');
  t.notOk(alive({ ...owner, boot: 'another-boot' }), 'an owner of an earlier boot is gone');
  t.notOk(
    alive({ ...owner, pidns: '1' }),
    'an owner of another pid namespace (an earlier run of the container) is gone',
  );
  t.notOk(alive(GONE), 'no such pid');
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGKILL');
  await exited;
  t.notOk(alive(owner), 'killed -9 and reaped');
});

t.test('close and reopen keeps everything', async (t) => {
  const dir = await tempDir(t);
  const first = await open(t, dir);
  await first.spool.enqueue(entry('m1', 'a.test', 100), bodyOf('m1'));
  await first.spool.enqueue(entry('m2', 'b.test', 200), bodyOf('m2'));
  await first.spool.enqueue(entry('m3', 'c.test', 300), bodyOf('m3'));
  await first.spool.reschedule('m1', 400, 1);
  await first.spool.remove('m3');
  const before = first.spool.list(10);
  await first.env.close();

  const { spool } = await open(t, dir);
  t.same(spool.list(10), before, 'the same entries in the same order');
  t.same(ids(spool.due(300, 10)), ['m2']);
  t.same(spool.get('m1'), entry('m1', 'a.test', 400, { attempts: 1 }));
  t.same(spool.body('m1'), bodyOf('m1'));
  t.same(spool.body('m2'), bodyOf('m2'));
  t.equal(spool.body('m3'), undefined);
  t.equal(spool.count(), 2);
});

t.test('1000 concurrent enqueues all resolve, share commits, and are all there after reopen', async (t) => {
  const dir = await tempDir(t);
  const first = await open(t, dir);
  const N = 1_000;
  const lastTxnId = () => {
    // The environment's last committed transaction id (mdb_env_info), read on a fresh snapshot.
    first.env.root.resetReadTxn();
    return (first.env.root.getStats() as { lastTxnId: number }).lastTxnId;
  };
  const txnBefore = lastTxnId();
  const all = Array.from({ length: N }, (_, i) => entry(`c${i}`, `d${i % 10}.test`, 1_000 + (i % 37)));
  const results = await Promise.allSettled(all.map((e) => first.spool.enqueue(e, bodyOf(e.id))));
  t.equal(results.filter((r) => r.status === 'fulfilled').length, N, 'every enqueue resolved');
  const txns = lastTxnId() - txnBefore;
  t.comment(`${N} concurrent enqueues took ${txns} LMDB write transaction(s)`);
  t.ok(txns >= 1 && txns <= N / 10, `commits are shared: ${txns} transactions for ${N} enqueues`);
  await first.env.close();

  const { spool } = await open(t, dir);
  t.equal(spool.count(), N);
  const missing = all.filter((e) => !spool.body(e.id)?.equals(bodyOf(e.id)) || spool.get(e.id)?.id !== e.id);
  t.same(ids(missing), [], 'every entry and body is present after reopen');
  const due = spool.due(Number.MAX_SAFE_INTEGER, N + 1);
  t.equal(due.length, N);
  const keys = due.map((e) => [e.nextAttemptMs, e.domain, e.id] as const);
  const sorted = [...keys].sort(
    (a, b) => a[0] - b[0] || (a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0) || (a[2] < b[2] ? -1 : a[2] > b[2] ? 1 : 0),
  );
  t.same(keys, sorted, 'and due walks them in schedule order');
});

// ---- kill -9 ------------------------------------------------------------------------------------------

// Acknowledgements to see before the kill, different per run so that the kill lands at different
// points of the child's commit cycle; the child keeps ~200 more enqueues in flight at that moment.
const ACKS_BEFORE_KILL = [300, 437, 611];
const CRASH_DEADLINE_MS = 60_000;

interface CrashRun {
  acked: string[];
  signal: NodeJS.Signals | null;
  code: number | null;
  stderr: string;
}

function runAndKill(dir: string, tag: string, acksBeforeKill: number): Promise<CrashRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...FROM_SOURCES, CHILD, dir, tag], {
      cwd: REPO,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const acked: string[] = [];
    let pending = '';
    let stderr = '';
    let killed = false;
    const kill = () => {
      if (killed || child.pid === undefined) return;
      killed = true;
      process.kill(child.pid, 'SIGKILL');
    };
    const deadline = setTimeout(() => {
      kill();
      reject(
        new Error(`child acknowledged only ${acked.length} enqueues within ${CRASH_DEADLINE_MS} ms; stderr: ${stderr}`),
      );
    }, CRASH_DEADLINE_MS);
    child.stderr.setEncoding('utf8').on('data', (s: string) => {
      stderr += s;
    });
    child.stdout.setEncoding('utf8').on('data', (s: string) => {
      // Only complete lines are acknowledgements; a trailing fragment waits for its newline.
      const lines = (pending + s).split('\n');
      pending = lines.pop() ?? '';
      for (const line of lines) if (line) acked.push(line);
      // Kill while enqueues are in flight: the child never waits between them.
      if (acked.length >= acksBeforeKill) kill();
    });
    child.on('error', (err) => {
      clearTimeout(deadline);
      reject(err);
    });
    // 'close' comes after stdout has been drained: acknowledgements written just before the kill,
    // still in the pipe, are counted too.
    child.on('close', (code, signal) => {
      clearTimeout(deadline);
      resolve({ acked, signal, code, stderr });
    });
  });
}

t.test('kill -9 during a burst of enqueues loses no acknowledged message (3 crashes, one spool)', async (t) => {
  // The three runs share one data directory: each restart opens a spool that was itself killed
  // mid-write, and every id acknowledged by any earlier run must still be there.
  const dir = await tempDir(t);
  const acked: string[] = [];
  for (const [i, acksBeforeKill] of ACKS_BEFORE_KILL.entries()) {
    const run = i + 1;
    const result = await runAndKill(dir, `r${run}`, acksBeforeKill);
    t.equal(
      result.signal,
      'SIGKILL',
      `run ${run}: the child died by SIGKILL${result.stderr ? ` (stderr: ${result.stderr})` : ''}`,
    );
    t.ok(
      result.acked.length >= acksBeforeKill,
      `run ${run}: ${result.acked.length} enqueues acknowledged before the kill`,
    );
    acked.push(...result.acked);

    const env = await openLmdb(dir);
    try {
      const spool = openSpool(env);
      const lost = acked.filter((id) => spool.get(id)?.id !== id);
      const corrupt = acked.filter((id) => !spool.body(id)?.equals(crashBody(id, crashSeq(id))));
      t.same(lost, [], `run ${run}: every acknowledged entry (${acked.length} so far) is in the spool`);
      t.same(corrupt, [], `run ${run}: with its body intact`);
      const count = spool.count();
      t.ok(
        count >= acked.length,
        `run ${run}: ${count} spooled, ${count - acked.length} of them never acknowledged ` +
          '(in flight at a kill; allowed: at-least-once)',
      );
    } finally {
      await env.close();
    }
  }
});

t.test('hold: the lease parks a held domain instead of leasing it; release makes it due again', async (t) => {
  const dir = await tempDir(t);
  const { spool } = await open(t, dir);
  const now = 1_000_000;
  await spool.enqueue(entry('h1', 'Held.Test', now - 10), bodyOf('h1'));
  await spool.enqueue(entry('f1', 'free.test', now - 5), bodyOf('f1'));
  await spool.enqueue(entry('c1', 'held.test', now - 1, { cancelledMs: now - 1 }), bodyOf('c1'));
  const multi = entry('m1', 'held.test', now - 2, {
    envelopes: [
      { domain: 'held.test', rcpts: ['a@held.test'], nextAttemptMs: now - 2, attempts: 1 },
      { domain: 'free.test', rcpts: ['b@free.test'], nextAttemptMs: now - 2, attempts: 0 },
    ],
  });
  await spool.enqueue(multi, bodyOf('m1'));
  t.ok(await spool.hold('held.test.', now), 'held (the name folded)');
  t.notOk(await spool.hold('HELD.test', now + 1), 'a second hold is no change');
  t.same(spool.heldDomains(), [{ domain: 'held.test', sinceMs: now }]);

  const leased = await spool.lease(now, 10, now + 600_000);
  t.same(ids(leased).sort(), ['c1', 'f1', 'm1'], 'the held entry is not leased; a cancelled one is, to end it');
  const h1 = spool.get('h1')!;
  t.equal(h1.nextAttemptMs, now + HELD_RECHECK_MS, 'parked for the recheck period');
  t.equal(h1.heldMs, now, 'and flagged');
  const m1 = leased.find((e) => e.id === 'm1')!;
  t.equal(m1.envelopes?.[0]?.heldMs, now, 'the held envelope is flagged (the worker skips it)');
  t.equal(m1.envelopes?.[0]?.nextAttemptMs, now + HELD_RECHECK_MS, 'and parked');
  t.equal(m1.envelopes?.[1]?.heldMs, undefined, 'the other is not');
  t.same(spool.due(now + 600_000 - 1, 10), [], 'nothing held stays due (no busy polling)');

  const sum = spool.summary();
  t.match(sum, { total: 4, deferred: 1, held: 3, cancelled: 1 });
  t.match(
    sum.byDomain.map((r) => [r.key, r.messages, r.deferred, r.held]),
    [
      ['held.test', 3, 1, 3],
      ['free.test', 2, 0, 0],
    ],
    'per destination domain: a message to several counts in each of its domains',
  );
  t.match(sum.bySender, [{ key: 'rp.sender.test', messages: 4, deferred: 1, held: 3 }], 'per sender domain');

  // The rest of m1 finished: rescheduled as the worker does, keeping the held envelope only.
  await spool.reschedule('m1', now + HELD_RECHECK_MS, 1, [m1.envelopes![0]!]);
  t.same(await spool.release('other.test', now + 10), { wasHeld: false, released: 0 }, 'not held: no change');
  t.same(
    await spool.release('held.test', now + 10),
    { wasHeld: true, released: 2 },
    'h1 and m1 due now; c1, leased, is left to its attempt',
  );
  t.same(spool.heldDomains(), []);
  t.equal(spool.get('h1')?.nextAttemptMs, now + 10, 'due now');
  t.equal(spool.get('h1')?.heldMs, undefined, 'flag cleared');
  t.same(spool.get('m1')?.envelopes, [
    { domain: 'held.test', rcpts: ['a@held.test'], nextAttemptMs: now + 10, attempts: 1 },
  ]);
  const again = await spool.lease(now + 10, 10, now + 600_000);
  t.same(ids(again).sort(), ['h1', 'm1'], 'leased once released');
});

t.test('hold survives reopening the environment (another process, a restart)', async (t) => {
  const dir = await tempDir(t);
  const first = await open(t, dir);
  await first.spool.hold('x.test', 5);
  await first.env.close();
  const second = await open(t, dir);
  t.same(second.spool.heldDomains(), [{ domain: 'x.test', sinceMs: 5 }]);
});

t.test('cancel with a reason keeps it (svc queue bounce); a second cancel keeps the first', async (t) => {
  const { spool } = await open(t, await tempDir(t));
  await spool.enqueue(entry('b1', 'a.test', 50), bodyOf('b1'));
  t.ok(await spool.cancel('b1', 10, 'bounced by operator'));
  t.match(spool.get('b1'), { cancelledMs: 10, cancelReason: 'bounced by operator', nextAttemptMs: 10 });
  t.ok(await spool.cancel('b1', 20));
  t.match(spool.get('b1'), { cancelledMs: 10, cancelReason: 'bounced by operator' });
});
