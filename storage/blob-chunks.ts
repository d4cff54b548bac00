// Shared by both blob stores: reads a body (bytes or a stream), hashing it as it arrives, into chunks of
// a fixed size. A blob's address is its SHA-256, known only at the end, so the chunks are held until then:
// once, never concatenated into one more copy. A stream's small pieces are packed into whole chunks (one
// copy); bytes given whole are cut into views of the caller's buffer (no copy).
import { createHash } from 'node:crypto';
import type { BlobSource } from '../mail/blob-store.js';

/** 256 KiB: large enough that a chunk is one row or one LMDB value per quarter megabyte, small enough to stream. */
export const BLOB_CHUNK_BYTES = 256 * 1024;

export interface ChunkedBody {
  address: string;
  size: number;
  chunks: Buffer[];
}

export async function readChunks(source: BlobSource, chunkBytes = BLOB_CHUNK_BYTES): Promise<ChunkedBody> {
  const hash = createHash('sha256');
  if (source instanceof Uint8Array) {
    const whole = Buffer.from(source.buffer, source.byteOffset, source.byteLength);
    hash.update(whole);
    const chunks: Buffer[] = [];
    for (let at = 0; at < whole.length; at += chunkBytes) chunks.push(whole.subarray(at, at + chunkBytes));
    return { address: hash.digest('hex'), size: whole.length, chunks };
  }
  const chunks: Buffer[] = [];
  let current = Buffer.allocUnsafe(chunkBytes);
  let filled = 0;
  let size = 0;
  for await (const piece of source) {
    if (!(piece instanceof Uint8Array)) throw new TypeError('blob stream must yield bytes (Buffer or Uint8Array)');
    hash.update(piece);
    size += piece.byteLength;
    let at = 0;
    while (at < piece.byteLength) {
      const n = Math.min(chunkBytes - filled, piece.byteLength - at);
      current.set(piece.subarray(at, at + n), filled);
      filled += n;
      at += n;
      if (filled === chunkBytes) {
        chunks.push(current);
        current = Buffer.allocUnsafe(chunkBytes);
        filled = 0;
      }
    }
  }
  if (filled > 0) chunks.push(current.subarray(0, filled));
  return { address: hash.digest('hex'), size, chunks };
}
