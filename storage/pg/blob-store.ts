// The Postgres blob store (SVC_BLOB_STORE=postgres): inbox message bodies in the `blobs` and
// `blob_chunks` tables, so that hosts sharing the database share mailboxes with no replication of our
// own (docs/architecture.md). Content-addressed and reference-counted: mail/blob-store.ts has the contract.
//
// A body is kept as 256 KiB `bytea` rows so that `stream` reads it a row at a time. "Find or store, then
// count" is one upsert: a second put of the same content waits on the first's row lock and then counts;
// a blob row always has refs >= 1 (a release that reaches 0 deletes it in the same transaction), so the
// upsert returning refs = 1 means this call stored it and must write the chunks. Durable at commit.
import { Buffer } from 'node:buffer';
import { Readable } from 'node:stream';
import type { Db } from './client.js';
import { BlobNotFoundError, checkBlobAddress, checkRefStep, type BlobStore } from '../../mail/blob-store.js';
import { readChunks } from '../blob-chunks.js';

// pg returns bytea as a Buffer, PGlite as a Uint8Array.
const asBuffer = (v: Uint8Array): Buffer =>
  Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.byteLength);

export function openPgBlobStore(db: Db): BlobStore {
  async function chunk(address: string, seq: number): Promise<Buffer> {
    const rows = await db.query<{ data: Uint8Array }>('SELECT data FROM blob_chunks WHERE address = $1 AND seq = $2', [
      address,
      seq,
    ]);
    // Only a release by a caller that held no reference can remove a blob under a reader.
    if (!rows[0]) throw new BlobNotFoundError(address);
    return asBuffer(rows[0].data);
  }

  async function info(address: string): Promise<{ size: number; refs: number; chunks: number } | null> {
    const rows = await db.query<{ size: number; refs: number; chunks: number }>(
      'SELECT size, refs, chunks FROM blobs WHERE address = $1',
      [address],
    );
    return rows[0] ?? null;
  }

  return {
    kind: 'postgres',

    async put(source) {
      const body = await readChunks(source);
      await db.tx(async (q) => {
        const [row] = await q.query<{ refs: number }>(
          `INSERT INTO blobs (address, size, refs, chunks) VALUES ($1, $2, 1, $3)
           ON CONFLICT (address) DO UPDATE SET refs = blobs.refs + 1 RETURNING refs`,
          [body.address, body.size, body.chunks.length],
        );
        if (row?.refs !== 1) return;
        for (const [seq, data] of body.chunks.entries()) {
          await q.query('INSERT INTO blob_chunks (address, seq, data) VALUES ($1, $2, $3)', [body.address, seq, data]);
        }
      });
      return { address: body.address, size: body.size };
    },

    async get(address) {
      checkBlobAddress(address);
      const m = await info(address);
      if (!m) return null;
      const parts: Buffer[] = [];
      for (let i = 0; i < m.chunks; i++) parts.push(await chunk(address, i));
      return Buffer.concat(parts, m.size);
    },

    async stream(address) {
      checkBlobAddress(address);
      const m = await info(address);
      if (!m) return null;
      return Readable.from(
        (async function* () {
          for (let i = 0; i < m.chunks; i++) yield await chunk(address, i);
        })(),
        { objectMode: false },
      );
    },

    async has(address) {
      checkBlobAddress(address);
      return (await info(address)) !== null;
    },

    async refs(address) {
      checkBlobAddress(address);
      return (await info(address))?.refs ?? 0;
    },

    async addRef(address, n = 1) {
      checkBlobAddress(address);
      checkRefStep(n);
      const rows = await db.query('UPDATE blobs SET refs = refs + $2 WHERE address = $1 RETURNING refs', [address, n]);
      if (!rows.length) throw new BlobNotFoundError(address);
    },

    async release(address, n = 1) {
      checkBlobAddress(address);
      checkRefStep(n);
      return db.tx(async (q) => {
        // Giving back more than is held is a caller's bug; the blob goes either way.
        const [row] = await q.query<{ refs: number }>(
          'UPDATE blobs SET refs = greatest(refs - $2, 0) WHERE address = $1 RETURNING refs',
          [address, n],
        );
        if (!row) throw new BlobNotFoundError(address);
        // The chunks go with it (ON DELETE CASCADE).
        if (row.refs === 0) await q.query('DELETE FROM blobs WHERE address = $1', [address]);
        return row.refs;
      });
    },

    // The database is closed by the Storage handle that opened it.
    async close() {},
  };
}
