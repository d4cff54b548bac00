// Reads the raw request body under a size limit, hashing it as it arrives. The raw bytes are kept: the
// signature (docs/api.md §5.2 line 5) covers their SHA-256, not a re-serialization of the parsed JSON.
//
// What an anonymous client can make us spend (issue 15 item 1): a body is read only after the request's head
// has passed (control/app.ts: the credential's head check runs first); a declared length over the limit is
// answered 413 at once, unread; a body that grows past it is answered 413 as soon as it does; and large
// bodies (over LARGE_BODY_BYTES, or of unknown length where more than that is allowed) are read a few at a
// time, the rest answered 429 with Retry-After. Past a 413 the connection closes, after at most a little of
// the rest is read and dropped, so that the client still gets to read the answer rather than a reset.
import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ApiError, fail } from '../errors.js';
import { bytePool, type BytePool } from './body-pool.js';

/** Bodies above this size count against the large-body cap. */
export const LARGE_BODY_BYTES = 1024 * 1024;
/** After a 413: at most this much more is read and dropped, for at most DRAIN_MS, before the socket closes. */
const DRAIN_BYTES = 1024 * 1024;
const DRAIN_MS = 2_000;

export interface RawBody {
  /** When pooled (body-pool.ts), lent: not to be read once `release` has been called. */
  raw: Buffer;
  /** SHA-256 of `raw`, hex. */
  sha256: string;
  /** Called once the request is over; does nothing for a body that was not pooled. */
  release(): void;
}

export interface BodyReader {
  read(req: IncomingMessage, res: ServerResponse, limit: number): Promise<RawBody>;
  /**
   * A request refused before its body was read: the answer closes the connection, after at most a little of
   * the body is dropped (else Node would read all of it, to keep the connection for the next request).
   */
  refuseUnread(req: IncomingMessage, res: ServerResponse): void;
}

/** Octets of idle pooled body buffers a process keeps (body-pool.ts): 64 bodies of 100 kB, or 16 of 1 MB. */
const POOL_KEEP_BYTES = 16 * 1024 * 1024;
/** The release of a body that was not pooled. */
const nothing = () => {};

/** `maxLarge`: how many large bodies may be read at once (SVC_HTTP_MAX_LARGE_BODIES). */
export function bodyReader(maxLarge: number): BodyReader {
  let large = 0;
  const pool = bytePool(POOL_KEEP_BYTES);
  return {
    refuseUnread(req, res) {
      const hasBody = Number(req.headers['content-length'] ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
      if (hasBody && !req.readableEnded) closeAfter(req, res);
    },
    async read(req, res, limit) {
      const declaredHeader = req.headers['content-length'];
      const declared = declaredHeader === undefined ? null : Number(declaredHeader);
      if (declared !== null && declared > limit) throw tooLarge(req, res, limit);
      const isLarge = declared === null ? limit > LARGE_BODY_BYTES : declared > LARGE_BODY_BYTES;
      if (isLarge && large >= maxLarge) {
        closeAfter(req, res);
        throw new ApiError(
          'rate_limited',
          'Too many large requests at once; try again in a second.',
          { retryAfterSeconds: 1 },
          { 'Retry-After': '1' },
        );
      }
      if (isLarge) large++;
      try {
        return await readUpTo(req, res, limit, pool);
      } finally {
        if (isLarge) large--;
      }
    },
  };
}

/**
 * Events rather than `for await`: leaving an async iteration early destroys the request, and with it the
 * socket the 413 must still be written to.
 */
function readUpTo(req: IncomingMessage, res: ServerResponse, limit: number, pool: BytePool): Promise<RawBody> {
  return new Promise((resolve, reject) => {
    const hash = createHash('sha256');
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        done();
        req.pause();
        reject(tooLarge(req, res, limit));
        return;
      }
      hash.update(chunk);
      chunks.push(chunk);
    };
    const onEnd = () => {
      done();
      const sha256 = hash.digest('hex');
      const lent = pool.take(size);
      if (!lent) return resolve({ raw: Buffer.concat(chunks, size), sha256, release: nothing });
      let at = 0;
      for (const chunk of chunks) at += chunk.copy(lent.bytes, at);
      resolve({ raw: lent.bytes, sha256, release: lent.release });
    };
    const onError = (err: Error) => {
      done();
      reject(err);
    };
    const onClose = () => onError(new Error('the client closed the connection before the body ended'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

function tooLarge(req: IncomingMessage, res: ServerResponse, limit: number): ApiError {
  closeAfter(req, res);
  return fail('payload_too_large', `Request body is larger than ${limit} bytes.`, { limit });
}

/**
 * The answer says the connection closes; once written, a little more of the body is dropped (a client that sends
 * all of it before reading then hears the answer), then nothing more is read and the connection closes when the
 * client has sent it all or at DRAIN_MS. Not at once past DRAIN_BYTES: closing a socket with unread data sends a
 * reset, which throws away what the client had received and not yet read, the answer included.
 */
function closeAfter(req: IncomingMessage, res: ServerResponse): void {
  res.setHeader('Connection', 'close');
  res.once('finish', () => {
    // Node's server ends a `Connection: close` response with socket.destroySoon(): a FIN, then destroy() once
    // it is written, which with the body's rest unread sends a reset that can overtake the answer. Our
    // listener runs after Node's: it keeps the half-closed socket (the server's sockets allow half-open) and
    // closes it below, when the client has sent everything or at DRAIN_MS (a lingering close, as nginx and
    // Apache do).
    req.socket.removeListener('finish', req.socket.destroy);
    let seen = 0;
    const stop = () => {
      clearTimeout(timer);
      req.removeListener('data', onData);
      req.socket.destroy();
    };
    const onData = (chunk: Buffer) => {
      seen += chunk.length;
      if (seen <= DRAIN_BYTES) return;
      // The kernel's buffers fill and the client's writes wait: no memory of ours, and the timer ends it.
      req.removeListener('data', onData);
      req.socket.pause();
    };
    const timer = setTimeout(stop, DRAIN_MS);
    timer.unref();
    req.on('data', onData);
    req.once('end', stop);
    req.resume();
  });
}

export function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw fail('invalid_request', 'Request body is not valid JSON.', { parseError: (err as Error).message });
  }
}
