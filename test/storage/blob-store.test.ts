// The blob store contract (mail/blob-store.ts), one set of cases run against every implementation: the
// local one on LMDB and the Postgres one (on PGlite, or on the Postgres of SVC_DATABASE_URL).
import t, { type Test } from 'tap';
import { createHash, randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { BlobNotFoundError, type BlobStore } from '../../mail/blob-store.js';
import { openMailTestStorage } from './mail-storage.js';
import { openLocalBlobStore } from '../../storage/lmdb/blob-store.js';
import { openLmdb } from '../../storage/lmdb/env.js';

const sha256 = (b: Buffer) => createHash('sha256').update(b).digest('hex');

async function readAll(r: Readable): Promise<{ body: Buffer; pieces: number }> {
  const parts: Buffer[] = [];
  for await (const c of r) parts.push(c as Buffer);
  return { body: Buffer.concat(parts), pieces: parts.length };
}

// A stream of small, uneven pieces, as a socket delivers them.
function trickle(body: Buffer, piece = 1000): Readable {
  return Readable.from(
    (function* () {
      for (let at = 0; at < body.length; at += piece) yield body.subarray(at, at + piece);
    })(),
    { objectMode: false },
  );
}

for (const kind of ['local', 'postgres'] as const) {
  t.test(`${kind} blob store`, async (t) => {
    const { storage } = await openMailTestStorage(t, kind);
    const blobs = storage.mail.blobs;
    t.equal(blobs.kind, kind, 'SVC_BLOB_STORE chooses the implementation');
    await contract(t, blobs);
  });
}

async function contract(t: Test, blobs: BlobStore) {
  t.test('put twice keeps one copy and counts two references', async (t) => {
    const body = Buffer.from(`Subject: hello\r\n\r\n${randomBytes(8).toString('hex')}\r\n`);
    const a = await blobs.put(body);
    t.same(a, { address: sha256(body), size: body.length }, 'the address is the SHA-256 of the bytes');
    const b = await blobs.put(trickle(body, 3));
    t.same(b, a, 'the same bytes as a stream give the same address');
    t.equal(await blobs.refs(a.address), 2);
    t.ok(await blobs.has(a.address));
    t.same(await blobs.get(a.address), body);
  });

  t.test('a body over 1 MB round-trips through get and stream, a chunk at a time', async (t) => {
    const body = randomBytes(3 * 1024 * 1024 + 12_345);
    const ref = await blobs.put(trickle(body, 16 * 1024 + 7));
    t.same(ref, { address: sha256(body), size: body.length });
    const got = await blobs.get(ref.address);
    t.ok(got && got.equals(body), 'get returns the exact bytes');
    const stream = await blobs.stream(ref.address);
    if (!stream) return t.fail('no stream');
    const { body: streamed, pieces } = await readAll(stream);
    t.ok(streamed.equals(body), 'stream returns the exact bytes');
    t.ok(pieces > 1, `streamed in ${pieces} pieces, not as one buffer`);
    // Bytes given whole are stored the same way.
    const again = await blobs.put(body);
    t.same(again, ref);
    t.equal(await blobs.refs(ref.address), 2);
  });

  t.test('read: a range, across chunk boundaries, clipped at the end', async (t) => {
    if (!blobs.read) return t.pass(`the ${blobs.kind} store reads no ranges (optional)`);
    const body = randomBytes(600 * 1024);
    const a = await blobs.put(body);
    t.same(await blobs.read(a.address, 0, 100), body.subarray(0, 100), 'the start of the first chunk');
    const across = [256 * 1024 - 10, 512 * 1024 + 10] as const;
    t.same(await blobs.read(a.address, ...across), body.subarray(...across), 'two chunk boundaries crossed');
    t.same(await blobs.read(a.address, 590 * 1024, 700 * 1024), body.subarray(590 * 1024), 'clipped at the end');
    t.equal((await blobs.read(a.address, 700 * 1024, 800 * 1024))?.length, 0, 'past the end: empty');
    t.equal(await blobs.read(sha256(Buffer.from('absent')), 0, 10), null, 'absent: null');
    t.same(await blobs.get(a.address), body, 'get is the whole range');
    // `before` comes first in the same buffer (IMAP's receipt prefix), whatever the range.
    const before = Buffer.from('Return-Path: <a@b.test>\r\n');
    t.same(await blobs.read(a.address, 0, 100, before), Buffer.concat([before, body.subarray(0, 100)]), 'before');
    t.same(
      await blobs.read(a.address, ...across, before),
      Buffer.concat([before, body.subarray(...across)]),
      'before, across chunks',
    );
    t.same(await blobs.read(a.address, 700 * 1024, 800 * 1024, before), before, 'before, past the end');
    t.equal(await blobs.read(sha256(Buffer.from('absent')), 0, 10, before), null, 'before, absent: null');
    // A body of one short chunk, and one of exactly two full chunks (no short last chunk to stop at).
    const small = randomBytes(3000);
    const s = await blobs.put(small);
    t.same(await blobs.read(s.address, 10, 1e9), small.subarray(10), 'one short chunk, clipped');
    t.same(await blobs.get(s.address), small, 'one short chunk, whole');
    const even = randomBytes(512 * 1024);
    const e = await blobs.put(even);
    t.same(await blobs.get(e.address), even, 'two full chunks, whole');
    t.same(await blobs.read(e.address, 300 * 1024, 1e9), even.subarray(300 * 1024), 'two full chunks, from the second');
    t.equal((await blobs.read(e.address, 512 * 1024, 1e9))?.length, 0, 'two full chunks, at the end: empty');
  });

  t.test("readMany: ranges of several blobs in one call, into memory of the caller's if given", async (t) => {
    if (!blobs.readMany) return t.pass(`the ${blobs.kind} store reads no batches (optional)`);
    const big = randomBytes(600 * 1024);
    const small = randomBytes(3000);
    const [b, s] = [await blobs.put(big), await blobs.put(small)];
    const absent = sha256(Buffer.from('absent'));
    const before = Buffer.from('Received: by us\r\n');
    const reads = [
      { address: b.address, start: 250 * 1024, end: 530 * 1024 },
      { address: absent, start: 0, end: 10 },
      { address: s.address, start: 0, end: 100, before },
      { address: s.address, start: 2990, end: 1e9 },
    ];
    const want = [
      big.subarray(250 * 1024, 530 * 1024),
      null,
      Buffer.concat([before, small.subarray(0, 100)]),
      small.subarray(2990),
    ];
    t.same(await blobs.readMany(reads), want, 'in order, null for an absent blob');
    const arena = Buffer.alloc(1024 * 1024);
    let used = 0;
    const alloc = (n: number) => arena.subarray(used, (used += n));
    const got = await blobs.readMany(reads, alloc);
    t.same(got, want, 'the same octets');
    t.ok(
      got.every((g) => g === null || g.buffer === arena.buffer),
      'each copied into the memory alloc gave',
    );
    t.same(await blobs.readMany([]), [], 'nothing asked, nothing read');
  });

  t.test('an empty body is a blob too', async (t) => {
    const ref = await blobs.put(Buffer.alloc(0));
    t.same(ref, { address: sha256(Buffer.alloc(0)), size: 0 });
    t.same(await blobs.get(ref.address), Buffer.alloc(0));
    const s = await blobs.stream(ref.address);
    t.same(s && (await readAll(s)).body, Buffer.alloc(0));
    t.equal(await blobs.release(ref.address), 0);
  });

  t.test('references: addRef and release count, and the blob goes at zero', async (t) => {
    const body = randomBytes(300_000);
    const { address } = await blobs.put(body);
    await blobs.addRef(address);
    await blobs.addRef(address, 2);
    t.equal(await blobs.refs(address), 4);
    t.equal(await blobs.release(address), 3);
    t.equal(await blobs.release(address, 2), 1);
    t.ok(await blobs.has(address), 'still there with one reference');
    t.equal(await blobs.release(address), 0, 'the last release');
    t.notOk(await blobs.has(address), 'removed at zero');
    t.equal(await blobs.get(address), null);
    t.equal(await blobs.stream(address), null);
    t.equal(await blobs.refs(address), 0);
    await t.rejects(blobs.release(address), BlobNotFoundError, 'releasing what is gone is an error');
    await t.rejects(blobs.addRef(address), BlobNotFoundError, 'so is referencing it');
    // Stored again after removal: a fresh blob with one reference.
    t.equal((await blobs.put(body)).address, address);
    t.equal(await blobs.refs(address), 1);
    t.same(await blobs.get(address), body);
  });

  t.test('bad input is refused before anything is stored', async (t) => {
    await t.rejects(blobs.get('not-an-address'), TypeError);
    await t.rejects(blobs.addRef('A'.repeat(64)), TypeError, 'upper-case hex is not an address');
    for (const bad of [
      'a'.repeat(63),
      'a'.repeat(65),
      `${'a'.repeat(63)}g`,
      `${'a'.repeat(63)}/`,
      `${'0'.repeat(63)}:`,
    ]) {
      await t.rejects(blobs.has(bad), TypeError, `${bad.length} characters ending ${bad.slice(-1)}: not an address`);
    }
    await t.rejects(blobs.addRef(sha256(Buffer.from('x')), 0), RangeError);
    await t.rejects(
      blobs.put(
        (async function* () {
          yield 'text' as unknown as Uint8Array;
        })(),
      ),
      TypeError,
    );
  });

  t.test('concurrency: counts are never lost and a blob in use is never removed', async (t) => {
    const body = randomBytes(600_000);
    const address = sha256(body);
    // 20 puts of the same new content at once: one copy, 20 references.
    const refs = await Promise.all(Array.from({ length: 20 }, () => blobs.put(body)));
    t.ok(refs.every((r) => r.address === address));
    t.equal(await blobs.refs(address), 20);
    // Puts and releases racing on a blob that never reaches zero.
    const ops: Promise<unknown>[] = [];
    for (let i = 0; i < 19; i++) ops.push(blobs.release(address), blobs.put(body));
    await Promise.all(ops);
    t.equal(await blobs.refs(address), 20, 'as many references as before');
    t.same(await blobs.get(address), body, 'and the bytes intact');
    // Release to zero racing with a put of the same content: either order leaves the put's blob whole.
    await blobs.release(address, 19);
    const [, put] = await Promise.all([blobs.release(address), blobs.put(body)]);
    t.equal(put.address, address);
    t.equal(await blobs.refs(address), 1);
    t.same(await blobs.get(address), body, 'the blob the put returned is there');
    // Distinct bodies at once.
    const many = Array.from({ length: 20 }, (_, i) => randomBytes(1000 + i));
    const stored = await Promise.all(many.map((b) => blobs.put(b)));
    t.same(
      stored.map((s) => s.address),
      many.map(sha256),
    );
    for (const [i, s] of stored.entries()) t.same(await blobs.get(s.address), many[i]);
  });
}

t.test('the local store is durable: a reopened environment has the blob and its count', async (t) => {
  const { storage, dataDir } = await openMailTestStorage(t, 'local');
  const body = randomBytes(700_000);
  const { address } = await storage.mail.blobs.put(body);
  await storage.mail.blobs.addRef(address);
  await storage.close();
  const env = await openLmdb(dataDir);
  t.teardown(() => env.close());
  const reopened = openLocalBlobStore(env);
  t.equal(await reopened.refs(address), 2);
  t.same(await reopened.get(address), body);
});
