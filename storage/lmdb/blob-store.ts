// The local blob store (the default, SVC_BLOB_STORE=local): inbox message bodies in the LMDB environment
// under SVC_DATA_DIR, content-addressed and reference-counted (mail/blob-store.ts has the contract).
//
// Two named databases in the one environment, so that one LMDB transaction spans a blob and its count:
//   blob_meta    address → { size, refs, chunks }
//   blob_chunks  [address, index] → Buffer (raw bytes, no msgpack)   written once, never changed
// A body is kept as 256 KiB chunks so that `stream` reads it a chunk at a time instead of whole.
//
// Durability, as the spool (storage/lmdb/spool.ts): every write resolves after its transaction has
// committed and the environment's `flushed` promise (the fsync) has resolved; concurrent writes share
// commits. Each transaction callback decides from what it reads inside the write transaction (LMDB has
// one writer), so "find or store, then count" is atomic against a concurrent release of the same content.
import { Readable } from 'node:stream';
import type { Database } from 'lmdb';
import type { LmdbEnv } from './env.js';
import { BlobNotFoundError, checkBlobAddress, checkRefStep, type BlobStore } from '../../mail/blob-store.js';
import { BLOB_CHUNK_BYTES, readChunks } from '../blob-chunks.js';

interface BlobMeta {
  size: number;
  refs: number;
  chunks: number;
}

type ChunkKey = [address: string, index: number];

/** The slabs `read` cuts its buffers from, and the largest buffer it cuts from one (larger ones stand alone). */
const SLAB = 1024 * 1024;
const SLAB_PIECE = 64 * 1024;

export function openLocalBlobStore(env: LmdbEnv): BlobStore {
  const { root } = env;
  const meta: Database<BlobMeta, string> = root.openDB<BlobMeta, string>({ name: 'blob_meta' });
  const chunks: Database<Buffer, ChunkKey> = root.openDB<Buffer, ChunkKey>({ name: 'blob_chunks', encoding: 'binary' });

  async function durable<T>(txn: () => T): Promise<T> {
    const result = await root.transaction(txn);
    await root.flushed;
    return result;
  }

  function chunk(address: string, index: number): Buffer {
    const c = chunks.get([address, index]);
    // Only a release by a caller that held no reference can remove a blob under a reader.
    if (!c) throw new BlobNotFoundError(address);
    return c;
  }

  /**
   * Buffers for `read`, cut from slabs of SLAB bytes (as Node's own pool does for small buffers): IMAP reads
   * every body of a mailbox for a FETCH 1:* BODY[], and one ArrayBuffer each would be 10,000 allocations for
   * the garbage collector to track and free. A slab lives while any buffer cut from it does; `read`'s
   * callers (IMAP) hold them only until written, and `get` (whose caller may keep the body) never uses them.
   */
  let slab = Buffer.allocUnsafeSlow(0);
  let slabUsed = 0;
  function cut(size: number): Buffer {
    if (size > SLAB_PIECE) return Buffer.allocUnsafe(size);
    if (slab.length - slabUsed < size) {
      slab = Buffer.allocUnsafeSlow(SLAB);
      slabUsed = 0;
    }
    const out = slab.subarray(slabUsed, slabUsed + size);
    // 8-byte aligned, as Node's pool keeps its pieces.
    slabUsed += (size + 7) & ~7;
    return out;
  }

  /**
   * Octets [start, end) of a blob, after `before` (copied in front), copied once out of LMDB's own memory:
   * getBinaryFast lends a view that holds until the next read, and only the range is copied out of it (a
   * header of a large body is a small copy; the whole body one copy, not one per chunk and another to join
   * them). The chunks have a fixed size (storage/blob-chunks.ts), so the range finds its first chunk without
   * the blob's meta record, and a chunk shorter than that size is the last: a read of a small body is one
   * LMDB lookup. The copy goes into `alloc(size)`. null when the blob is absent.
   */
  function range(
    address: string,
    start: number,
    end: number,
    before: Uint8Array | undefined,
    alloc: (size: number) => Buffer,
  ): Buffer | null {
    const from = Math.max(0, start);
    const first = Math.floor(from / BLOB_CHUNK_BYTES);
    const head = before?.length ?? 0;
    let lent = chunks.getBinaryFast([address, first]);
    if (!lent) {
      // No such chunk: the blob is absent, empty, or shorter than `from`; its meta record says which.
      const m = meta.get(address);
      if (!m) return null;
      const out = alloc(head);
      if (before) out.set(before, 0);
      return out;
    }
    let c = lent.subarray(0, (chunks as unknown as { lastSize: number }).lastSize);
    let pos = first * BLOB_CHUNK_BYTES;
    let to = Math.min(end, pos + c.length);
    if (end > to && c.length === BLOB_CHUNK_BYTES) {
      // The range goes on past a full chunk: the blob's size (its meta record) says how far.
      const m = meta.get(address);
      if (!m) throw new BlobNotFoundError(address);
      to = Math.min(end, m.size);
      // That read took back the lent view: the chunk again.
      lent = chunks.getBinaryFast([address, first]);
      if (!lent) throw new BlobNotFoundError(address);
      c = lent.subarray(0, (chunks as unknown as { lastSize: number }).lastSize);
    }
    to = Math.max(from, to);
    const out = alloc(head + to - from);
    if (before) out.set(before, 0);
    let at = head;
    for (let i = first; ;) {
      if (pos + c.length > from && pos < to) {
        at += c.copy(out, at, Math.max(from, pos) - pos, Math.min(to, pos + c.length) - pos);
      }
      pos += c.length;
      if (pos >= to || c.length < BLOB_CHUNK_BYTES) break;
      lent = chunks.getBinaryFast([address, ++i]);
      // Only a release by a caller that held no reference can remove a blob under a reader.
      if (!lent) throw new BlobNotFoundError(address);
      c = lent.subarray(0, (chunks as unknown as { lastSize: number }).lastSize);
    }
    return at === out.length ? out : out.subarray(0, at);
  }

  return {
    kind: 'local',

    // Bytes given whole are written when the batch commits, after this call has returned to the event
    // loop: the caller must not modify them until the promise settles.
    async put(source) {
      const body = await readChunks(source);
      await durable(() => {
        const found = meta.get(body.address);
        if (found) {
          meta.put(body.address, { ...found, refs: found.refs + 1 });
          return;
        }
        body.chunks.forEach((c, i) => chunks.put([body.address, i], c));
        meta.put(body.address, { size: body.size, refs: 1, chunks: body.chunks.length });
      });
      return { address: body.address, size: body.size };
    },

    async get(address) {
      checkBlobAddress(address);
      return range(address, 0, Infinity, undefined, Buffer.allocUnsafe);
    },

    async read(address, start, end, before) {
      checkBlobAddress(address);
      return range(address, start, end, before, cut);
    },

    // One synchronous pass over LMDB for the whole batch: one read transaction, no wait between the reads.
    async readMany(reads, alloc = cut) {
      const out: Array<Buffer | null> = new Array(reads.length);
      for (let i = 0; i < reads.length; i++) {
        const r = reads[i]!;
        checkBlobAddress(r.address);
        try {
          out[i] = range(r.address, r.start, r.end, r.before, alloc);
        } catch (err) {
          if (!(err instanceof BlobNotFoundError)) throw err;
          out[i] = null;
        }
      }
      return out;
    },

    async stream(address) {
      checkBlobAddress(address);
      const m = meta.get(address);
      if (!m) return null;
      return Readable.from(
        (function* () {
          for (let i = 0; i < m.chunks; i++) yield chunk(address, i);
        })(),
        { objectMode: false },
      );
    },

    async has(address) {
      checkBlobAddress(address);
      return meta.doesExist(address);
    },

    async refs(address) {
      checkBlobAddress(address);
      return meta.get(address)?.refs ?? 0;
    },

    async addRef(address, n = 1) {
      checkBlobAddress(address);
      checkRefStep(n);
      const found = await durable(() => {
        const m = meta.get(address);
        if (!m) return false;
        meta.put(address, { ...m, refs: m.refs + n });
        return true;
      });
      if (!found) throw new BlobNotFoundError(address);
    },

    async release(address, n = 1) {
      checkBlobAddress(address);
      checkRefStep(n);
      const left = await durable(() => {
        const m = meta.get(address);
        if (!m) return -1;
        // Giving back more than is held is a caller's bug; the blob goes either way.
        const refs = Math.max(0, m.refs - n);
        if (refs > 0) {
          meta.put(address, { ...m, refs });
          return refs;
        }
        for (let i = 0; i < m.chunks; i++) chunks.remove([address, i]);
        meta.remove(address);
        return 0;
      });
      if (left < 0) throw new BlobNotFoundError(address);
      return left;
    },

    // The environment is closed by the Storage handle that opened it.
    async close() {},
  };
}
