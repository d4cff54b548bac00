// Shared by both blob stores: reads a body (bytes or a stream), hashing it as it arrives, into chunks of
// a fixed size. A blob's address is its SHA-256, known only at the end, so the chunks are held until then:
// once, never concatenated into one more copy. A stream's pieces are joined once per chunk (one copy; a
// body that is one piece, none); bytes given whole are cut into views of the caller's buffer (no copy).
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
  // The pieces are kept as they come and joined once per chunk (a body smaller than a chunk is one copy of
  // its own size, not a chunk-sized buffer).
  const chunks: Buffer[] = [];
  let pieces: Buffer[] = [];
  let pending = 0;
  let size = 0;
  for await (const piece of source) {
    if (!(piece instanceof Uint8Array)) throw new TypeError('blob stream must yield bytes (Buffer or Uint8Array)');
    hash.update(piece);
    size += piece.byteLength;
    pieces.push(Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength));
    pending += piece.byteLength;
    if (pending < chunkBytes) continue;
    const joined = Buffer.concat(pieces, pending);
    let at = 0;
    for (; joined.length - at >= chunkBytes; at += chunkBytes) chunks.push(joined.subarray(at, at + chunkBytes));
    pieces = at < joined.length ? [joined.subarray(at)] : [];
    pending = joined.length - at;
  }
  if (pending > 0) chunks.push(pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces, pending));
  return { address: hash.digest('hex'), size, chunks };
}
