// The load generator's transport, as cheap as we can make it: HTTP/1.1 written straight onto
// keep-alive sockets, one request at a time per socket, and the answer read by its Content-Length.
// The global fetch (undici) cost the bench process ~1 ms of CPU per request and node:http ~0.35 ms,
// on the two cores the service and Postgres also run on; Postfix's side is driven by smtp-source, in C.
// The SDK still builds and signs every request (ClientOptions.fetch), with `leanSign` (ClientOptions.sign):
// the SDK's string to sign, hashed by node:crypto synchronously instead of WebCrypto's promises. Enough HTTP
// for our own server's answers (a status line, headers, a Content-Length body), nothing more: no chunked
// bodies, no redirects, no TLS.
import net from 'node:net';
import { createHash, createHmac, randomUUID } from 'node:crypto';
import { signatureHeaders, stringToSign, type Signer } from '@svc-mail/sdk';

/** docs/api.md §5.2 signing as the SDK's `signHeaders` does it, without a promise per request. */
export const leanSign: Signer = (s) => {
  if (typeof s.secret !== 'string') throw new TypeError('leanSign takes the secret itself, not a CryptoKey');
  const timestamp = s.timestamp ?? String(Date.now());
  const nonce = s.nonce ?? randomUUID();
  const bodyHash = createHash('sha256').update(s.body).digest('hex');
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
  if (body !== undefined) lines.push(`content-length: ${Buffer.byteLength(body)}`);
  const answer = new Promise<Answer>((resolve, reject) => {
    c.waiting = resolve;
    c.fail = reject;
  });
  // Head and body written corked: one send, and the body encoded once, straight into the socket's buffer.
  c.socket.cork();
  c.socket.write(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  if (body !== undefined) c.socket.write(body, 'utf8');
  c.socket.uncork();
  const a = await answer;
  free.push(c);
  return a;
}) as unknown as typeof fetch;
