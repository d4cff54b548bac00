// The blob store that holds inbox message bodies (docs/architecture.md, "Receiving and reading mail"):
// declared here, where the MX listener, the IMAP server and the webmail API import it, and implemented
// in storage/ (LMDB under SVC_DATA_DIR by default, or Postgres so that hosts sharing the database share
// mailboxes). Types and tiny pure helpers only.
//
// Content-addressed: a blob's address is the hex SHA-256 of its bytes, so storing the same body twice
// keeps one copy. Reference-counted: `put` and `addRef` each take one reference, `release` gives one
// back, and the blob is deleted when its count reaches zero.
//
// The rule that keeps counts safe across two stores (a message row in Postgres, its body here): take
// the reference before the row that needs it is committed, and give it back only after that row is
// gone. A crash in between then leaves a count one too high (a leak a sweep can reclaim), never one too
// low (a body lost under a live message).
import type { Readable } from 'node:stream';

export interface BlobRef {
  /** Hex SHA-256 of the bytes (64 lower-case hex digits). */
  address: string;
  size: number;
}

/** What `put` accepts: the bytes, or a stream of them (hashed as it arrives). */
export type BlobSource = Uint8Array | AsyncIterable<Uint8Array>;

/** One range of `readMany`: octets [start, end) of a blob, after `before` (see `read`). */
export interface BlobRead {
  address: string;
  start: number;
  end: number;
  before?: Uint8Array;
}

export interface BlobStore {
  readonly kind: 'local' | 'postgres';
  /**
   * Stores the bytes (or finds them already stored) and takes one reference, in one atomic step, so a
   * concurrent `release` of the same content can never delete what this call returns. Resolves once
   * the bytes and the count are durable.
   */
  put(source: BlobSource): Promise<BlobRef>;
  /** The whole blob, or null when no blob has that address. */
  get(address: string): Promise<Buffer | null>;
  /**
   * Optional: octets [start, end) of the blob (end clipped to its size), copied once and nothing else
   * read, or null when absent; with `before`, those bytes come first in the same buffer (IMAP's receipt
   * prefix, so that a served message is one copy, not two). IMAP reads a header or a part this way
   * (imap/store-backend.ts).
   */
  read?(address: string, start: number, end: number, before?: Uint8Array): Promise<Buffer | null>;
  /**
   * Optional: `read` of many ranges in one call, in order; null for a blob that is absent (or released
   * while read). A store that reads synchronously (LMDB) answers a FETCH batch with one wait, not one per
   * message. Each range is copied into `alloc(size)`, memory the caller may reuse once it has written it;
   * without `alloc`, into buffers of the store's own that may share memory with others (hold them only
   * until they are written).
   */
  readMany?(reads: readonly BlobRead[], alloc?: (size: number) => Buffer): Promise<Array<Buffer | null>>;
  /** The blob as a stream of chunks (never buffered whole), or null when absent. */
  stream(address: string): Promise<Readable | null>;
  has(address: string): Promise<boolean>;
  /** The current reference count (0 when absent). */
  refs(address: string): Promise<number>;
  /** Takes `n` more references (default 1); throws BlobNotFoundError when absent. Durable. */
  addRef(address: string, n?: number): Promise<void>;
  /**
   * Gives back `n` references (default 1) and deletes the blob when none is left; resolves with the
   * count left (0: deleted). Throws BlobNotFoundError when absent. Durable.
   */
  release(address: string, n?: number): Promise<number>;
  close(): Promise<void>;
}

export class BlobNotFoundError extends Error {
  readonly address: string;
  constructor(address: string) {
    super(`blob ${address} not found`);
    this.address = address;
    this.name = 'BlobNotFoundError';
  }
}

/**
 * 64 lower-case hex digits. A loop rather than /^[0-9a-f]{64}$/: IMAP checks every address it reads, 10,000
 * for a FETCH of a mailbox's headers, and the expression cost more than the rest of the address's handling.
 */
export function isBlobAddress(s: unknown): s is string {
  if (typeof s !== 'string' || s.length !== 64) return false;
  for (let i = 0; i < 64; i++) {
    const c = s.charCodeAt(i);
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

/** Throws a TypeError unless `s` is a blob address (checked before any storage is touched). */
export function checkBlobAddress(s: unknown): string {
  if (!isBlobAddress(s)) throw new TypeError(`not a blob address: ${JSON.stringify(s)}`);
  return s;
}

/** Reference counts move by whole positive steps. */
export function checkRefStep(n: number): number {
  if (!Number.isSafeInteger(n) || n < 1) throw new RangeError(`reference step must be a positive integer, not ${n}`);
  return n;
}
