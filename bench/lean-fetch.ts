// The load generator's transport, as cheap as we can make it: HTTP/1.1 written straight onto
// keep-alive sockets, one request at a time per socket, and the answer read by its Content-Length.
// The global fetch (undici) cost the bench process ~1 ms of CPU per request and node:http ~0.35 ms,
// on the two cores the service and Postgres also run on; Postfix's side is driven by smtp-source, in C.
// The SDK still builds and signs every request (ClientOptions.fetch), with `leanSign` (ClientOptions.sign):
// the SDK's string to sign, hashed by node:crypto synchronously instead of WebCrypto's promises. Enough HTTP
// for our own server's answers (a status line, headers, a Content-Length body), nothing more: no chunked
// bodies, no redirects, no TLS.
import net from 'node:net';
import { createHash, createHmac, randomUUID, type Hash } from 'node:crypto';
import { signatureHeaders, stringToSign, type Signer } from '@svc-mail/sdk';

/**
 * The start that the bodies of a load share: sendLoad's text, JSON-encoded once and first in every message, so that
 * each body is this prefix, then the message's own fields (JSON.stringify writes a raw JSON text as it stands and the
 * properties in their order). Its UTF-8 octets and its SHA-256 state are made once: leanSign hashes, and leanFetch
 * encodes, only the rest of each body, as smtp-source sends one prepared file. At 100 kB the body's hash and its
 * encoding for the socket were ~0.14 ms of the load generator's ~0.40 ms of CPU a request, on the cores that the
 * service it measures runs on.
 */
interface Prefix {
  text: string;
  octets: Buffer;
  sha256: Hash;
  /** Looks at a body (leanSign's, then leanFetch's): one in PREFIX_CHECK_EVERY compares it whole, others its length. */
  seen: number;
}
let prefix: Prefix | null = null;
/** A whole comparison costs about what the prefix saves (V8's startsWith, a character at a time): it is sampled. */
const PREFIX_CHECK_EVERY = 256;

/**
 * Sets the prefix that the bodies of the next requests share, from the properties that come first in each of their
 * JSON objects: `{"text":"…",` for `{ text }` (null: none).
 */
export function sharedBodyPrefix(lead: Record<string, unknown> | null): void {
  if (lead === null) {
    prefix = null;
    return;
  }
  const text = `${JSON.stringify(lead).slice(0, -1)},`;
  prefix = { text, octets: Buffer.from(text, 'utf8'), sha256: createHash('sha256').update(text), seen: 0 };
}

/** The prefix when `body` holds it and more; throws when a sampled body that should hold it does not. */
function prefixOf(body: string): Prefix | null {
  const p = prefix;
  if (p === null || body.length <= p.text.length) return null;
  if (p.seen++ % PREFIX_CHECK_EVERY === 0 && !body.startsWith(p.text))
    throw new Error("a request body does not start with the load's shared prefix (sharedBodyPrefix)");
  return p;
}

/** The SHA-256 of a request body, hex: from the shared prefix's state when the body holds it. */
function bodySha256(body: string): string {
  const p = prefixOf(body);
  if (p === null) return createHash('sha256').update(body).digest('hex');
  return p.sha256.copy().update(body.slice(p.text.length)).digest('hex');
}

/** docs/api.md §5.2 signing as the SDK's `signHeaders` does it, without a promise per request. */
export const leanSign: Signer = (s) => {
  if (typeof s.secret !== 'string') throw new TypeError('leanSign takes the secret itself, not a CryptoKey');
  const timestamp = s.timestamp ?? String(Date.now());
  const nonce = s.nonce ?? randomUUID();
  const bodyHash = bodySha256(s.body);
  const sig = createHmac('sha256', s.secret).update(stringToSign(s.method, s.target, timestamp, nonce, bodyHash));
  return signatureHeaders(s.keyId, sig.digest('hex'), timestamp, nonce);
};

interface Init {
  method?: string;
  headers?: Record<string, string>;
  body?: string;
}

interface Answer {
  ok: boolean;
  status: number;
  text(): Promise<string>;
  headers: { get(name: string): string | null };
}

interface Conn {
  socket: net.Socket;
  waiting: ((a: Answer) => void) | null;
  fail: ((err: Error) => void) | null;
  buf: Buffer;
}

const idle = new Map<string, Conn[]>();

function connect(host: string, port: number): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host);
    socket.setNoDelay(true);
    const c: Conn = { socket, waiting: null, fail: null, buf: Buffer.alloc(0) };
    socket.once('connect', () => resolve(c));
    socket.on('error', (err) => (c.fail ? c.fail(err) : reject(err)));
    // The server closes a socket idle past its keep-alive timeout (65 s): one waiting in the pool is then
    // passed over (leanFetch); a write onto it would be dropped without an error, and its answer never come.
    socket.once('close', () => c.fail?.(new Error('connection closed')));
    socket.on('data', (chunk: Buffer) => {
      c.buf = c.buf.length ? Buffer.concat([c.buf, chunk]) : chunk;
      const end = c.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = c.buf.toString('latin1', 0, end).split('\r\n');
      const fields = new Map(
        head.slice(1).map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]),
      );
      const length = Number(fields.get('content-length') ?? 0);
      if (c.buf.length < end + 4 + length) return;
      const text = c.buf.toString('utf8', end + 4, end + 4 + length);
      c.buf = c.buf.subarray(end + 4 + length);
      const status = Number(head[0]!.split(' ')[1]);
      const done = c.waiting;
      c.waiting = c.fail = null;
      done?.({
        ok: status >= 200 && status < 300,
        status,
        text: async () => text,
        headers: { get: (n) => fields.get(n.toLowerCase()) ?? null },
      });
    });
  });
}

/**
 * Closes the sockets waiting in the pool: a load then opens its own, which the service's cluster hands to its workers
 * in turn. Reused from an earlier load, they were whichever the pool held on top: sendBatch's 8 clients found 8
 * sockets of one worker there, and the other worker sat idle through the measurement.
 */
export function closeIdle(): void {
  for (const free of idle.values()) for (const c of free.splice(0)) c.socket.destroy();
}

export const leanFetch = (async (url: string, init: Init = {}): Promise<Answer> => {
  const u = new URL(url);
  const origin = u.host;
  const free = idle.get(origin) ?? [];
  idle.set(origin, free);
  let c = free.pop();
  while (c && (c.socket.destroyed || !c.socket.writable)) c = free.pop();
  c ??= await connect(u.hostname, Number(u.port));
  const body = init.body;
  const lines = [`${init.method ?? 'GET'} ${u.pathname}${u.search} HTTP/1.1`, `host: ${origin}`];
  for (const [k, v] of Object.entries(init.headers ?? {})) lines.push(`${k}: ${v}`);
  const shared = body === undefined ? null : prefixOf(body);
  const rest = body === undefined ? undefined : shared ? body.slice(shared.text.length) : body;
  if (rest !== undefined) lines.push(`content-length: ${(shared?.octets.length ?? 0) + Buffer.byteLength(rest)}`);
  const answer = new Promise<Answer>((resolve, reject) => {
    c.waiting = resolve;
    c.fail = reject;
  });
  // Head and body written corked: one send, and the body encoded once, straight into the socket's buffer.
  c.socket.cork();
  c.socket.write(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  if (shared) c.socket.write(shared.octets);
  if (rest !== undefined) c.socket.write(rest, 'utf8');
  c.socket.uncork();
  const a = await answer;
  free.push(c);
  return a;
}) as unknown as typeof fetch;
