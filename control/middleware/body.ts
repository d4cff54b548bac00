// Reads the raw request body under a size limit. The raw bytes are kept: the signature (docs/api.md §5.2
// line 5) covers their SHA-256, not a re-serialization of the parsed JSON.
import type { IncomingMessage } from 'node:http';
import { fail } from '../errors.js';

// Past the limit we keep reading and discarding up to this much more, so that a client still
// uploading gets to read our 413 instead of a reset connection; beyond it we cut the connection.
const DRAIN_CAP = 64 * 1024 * 1024;

export async function readRawBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers['content-length'] ?? NaN);
  const tooLarge = () => fail('payload_too_large', `Request body is larger than ${limit} bytes.`, { limit });
  if (declared > limit) {
    await drain(req);
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > limit) {
      await drain(req);
      throw tooLarge();
    }
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks, size);
}

async function drain(req: IncomingMessage): Promise<void> {
  let seen = 0;
  for await (const chunk of req) {
    seen += (chunk as Buffer).length;
    if (seen > DRAIN_CAP) {
      req.socket.destroy();
      return;
    }
  }
}

export function parseJson(raw: Buffer): unknown {
  if (raw.length === 0) return undefined;
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch (err) {
    throw fail('invalid_request', 'Request body is not valid JSON.', { parseError: (err as Error).message });
  }
}
