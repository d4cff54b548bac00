// docs/decisions.md #1: every non-2xx body is { error: { code, message, details?, requestId } } and
// every response, success or error, carries an X-Request-Id header (equal to requestId on errors).
import t, { type Test } from 'tap';
import { Writable } from 'node:stream';
import pino from 'pino';
import { startTestService, uniqueEmail, type TestService } from '../helpers/service.js';

const MB = 1024 * 1024;
const SIGNUP = '/auth/v1/signup';

interface Res {
  status: number;
  headers: Headers;
  text: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

async function send(
  svc: TestService,
  method: string,
  target: string,
  body?: RequestInit['body'],
  headers: Record<string, string> = {},
): Promise<Res> {
  const init: RequestInit & { duplex?: 'half' } = {
    method,
    headers: { ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    body,
  };
  if (body instanceof ReadableStream) init.duplex = 'half';
  const res = await fetch(svc.url + target, init);
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, body: json };
}

/** Checks the envelope of an error response; returns its requestId. */
function expectEnvelope(t: Test, res: Res, status: number, code: string, what: string): string {
  t.equal(
    res.status,
    status,
    `${what}: status ${status}${res.status === status ? '' : ` (got ${res.text.slice(0, 300)})`}`,
  );
  t.match(res.headers.get('content-type') ?? '', /^application\/json/, `${what}: JSON body`);
  t.type(res.body, 'object', `${what}: body parses as JSON`);
  const e = res.body?.error;
  t.type(e, 'object', `${what}: body.error is an object`);
  t.equal(e?.code, code, `${what}: code ${code}`);
  t.type(e?.message, 'string', `${what}: message is a string`);
  t.ok(String(e?.message ?? '').length > 0, `${what}: message is not empty`);
  t.type(e?.requestId, 'string', `${what}: requestId is a string`);
  t.ok(String(e?.requestId ?? '').length > 0, `${what}: requestId is not empty`);
  t.equal(res.headers.get('x-request-id'), e?.requestId, `${what}: X-Request-Id header equals error.requestId`);
  const allowed = ['code', 'message', 'details', 'requestId'];
  t.same(
    Object.keys(e ?? {}).filter((k) => !allowed.includes(k)),
    [],
    `${what}: no fields beyond code, message, details, requestId`,
  );
  t.same(Object.keys(res.body ?? {}), ['error'], `${what}: nothing beside "error" at the top level`);
  return e?.requestId as string;
}

/** A signup body of exactly `size` bytes: valid, padded with white space. */
function paddedSignup(size: number): string {
  // Padded with JSON white space: an unknown field would be refused (docs/decisions.md #23).
  const head = `{"email":"${uniqueEmail('pad')}","password":"correct horse battery"`;
  const tail = '}';
  const n = size - head.length - tail.length;
  if (n < 0) throw new Error('size too small');
  const s = head + ' '.repeat(n) + tail;
  if (Buffer.byteLength(s) !== size) throw new Error('padding arithmetic');
  return s;
}

/** A body sent chunked (no Content-Length), so the server must count as it reads. */
function chunked(s: string, chunk = 64 * 1024): ReadableStream<Uint8Array> {
  const buf = Buffer.from(s);
  let off = 0;
  return new ReadableStream({
    pull(c) {
      if (off >= buf.length) return c.close();
      c.enqueue(new Uint8Array(buf.subarray(off, off + chunk)));
      off += chunk;
    },
  });
}

t.test('error envelope on every error path', async (t) => {
  const svc = await startTestService(t);
  const ids = new Set<string>();
  const seen = (id: string) => {
    t.notOk(ids.has(id), `request id ${id} is unique`);
    ids.add(id);
  };

  t.test('successful responses carry X-Request-Id', async (t) => {
    const h1 = await send(svc, 'GET', '/health');
    t.equal(h1.status, 200);
    const id1 = h1.headers.get('x-request-id');
    t.ok(id1, 'health has X-Request-Id');
    const h2 = await send(svc, 'GET', '/health');
    t.ok(h2.headers.get('x-request-id'), 'again');
    t.not(h2.headers.get('x-request-id'), id1, 'a new id per request');
    const s = await send(
      svc,
      'POST',
      SIGNUP,
      JSON.stringify({ email: uniqueEmail(), password: 'correct horse battery' }),
    );
    t.equal(s.status, 200, 'signup succeeds');
    t.ok(s.headers.get('x-request-id'), 'signup has X-Request-Id');
    seen(id1 ?? '');
    seen(h2.headers.get('x-request-id') ?? '');
    seen(s.headers.get('x-request-id') ?? '');
  });

  t.test('unknown route → 404 not_found', async (t) => {
    seen(expectEnvelope(t, await send(svc, 'GET', '/nope'), 404, 'not_found', 'GET /nope'));
    seen(expectEnvelope(t, await send(svc, 'POST', '/nope', '{}'), 404, 'not_found', 'POST /nope'));
    seen(
      expectEnvelope(t, await send(svc, 'GET', '/v1/services/whoami/extra'), 404, 'not_found', 'known path + suffix'),
    );
  });

  t.test('wrong method on a known path → 404 not_found', async (t) => {
    seen(expectEnvelope(t, await send(svc, 'DELETE', SIGNUP), 404, 'not_found', 'DELETE /auth/v1/signup'));
    seen(expectEnvelope(t, await send(svc, 'GET', SIGNUP), 404, 'not_found', 'GET /auth/v1/signup'));
    seen(expectEnvelope(t, await send(svc, 'POST', '/health', '{}'), 404, 'not_found', 'POST /health'));
  });

  t.test('malformed JSON → 400 invalid_request', async (t) => {
    seen(expectEnvelope(t, await send(svc, 'POST', SIGNUP, '{"email":'), 400, 'invalid_request', 'truncated JSON'));
    seen(expectEnvelope(t, await send(svc, 'POST', SIGNUP, "{'email': 'x'}"), 400, 'invalid_request', 'single quotes'));
    seen(
      expectEnvelope(
        t,
        await send(svc, 'POST', SIGNUP, 'null'),
        400,
        'invalid_request',
        'JSON null instead of an object',
      ),
    );
    seen(
      expectEnvelope(
        t,
        await send(svc, 'POST', SIGNUP, '[1,2]'),
        400,
        'invalid_request',
        'JSON array instead of an object',
      ),
    );
  });

  t.test('body over 1 MB → 413 payload_too_large', async (t) => {
    const over = paddedSignup(MB + 1);
    const r1 = await send(svc, 'POST', SIGNUP, over);
    seen(expectEnvelope(t, r1, 413, 'payload_too_large', '1048577 bytes with Content-Length'));
    const r2 = await send(svc, 'POST', SIGNUP, chunked(over));
    seen(expectEnvelope(t, r2, 413, 'payload_too_large', '1048577 bytes chunked'));
    const r3 = await send(svc, 'POST', SIGNUP, chunked(paddedSignup(3 * MB)));
    seen(expectEnvelope(t, r3, 413, 'payload_too_large', '3 MB chunked'));

    const at = await send(svc, 'POST', SIGNUP, paddedSignup(MB));
    t.not(at.status, 413, 'exactly 1048576 bytes is not 413');
    t.equal(
      at.status,
      200,
      `exactly 1048576 bytes: a valid signup${at.status === 200 ? '' : ` (got ${at.text.slice(0, 200)})`}`,
    );
    const atChunked = await send(svc, 'POST', SIGNUP, chunked(paddedSignup(MB)));
    t.equal(
      atChunked.status,
      200,
      'exactly 1048576 bytes chunked: a valid signup' +
        (atChunked.status === 200 ? '' : ` (got ${atChunked.text.slice(0, 200)})`),
    );
    const under = await send(svc, 'POST', SIGNUP, paddedSignup(MB - 1));
    t.equal(under.status, 200, 'one byte under the limit: a valid signup');
  });

  t.test('schema violation → 400 invalid_request naming each field', async (t) => {
    const r = await send(svc, 'POST', SIGNUP, JSON.stringify({ password: 'short' }));
    seen(expectEnvelope(t, r, 400, 'invalid_request', 'email missing, password too short'));
    const details = r.body?.error?.details;
    t.ok(Array.isArray(details), 'details is an array');
    const fields = (Array.isArray(details) ? details : []).map((d: { field?: unknown }) => d?.field);
    t.ok(fields.includes('body.email'), `details name body.email (got ${JSON.stringify(fields)})`);
    t.ok(fields.includes('body.password'), `details name body.password (got ${JSON.stringify(fields)})`);
    for (const d of Array.isArray(details) ? details : [])
      t.type(d?.message, 'string', `detail ${d?.field} has a message`);

    const bad = await send(svc, 'POST', SIGNUP, JSON.stringify({ email: 'not-an-email', password: 12345678901 }));
    seen(expectEnvelope(t, bad, 400, 'invalid_request', 'bad email format, password not a string'));
    const f2 = (bad.body?.error?.details ?? []).map((d: { field?: unknown }) => d?.field);
    t.ok(f2.includes('body.email') && f2.includes('body.password'), `both fields named (got ${JSON.stringify(f2)})`);

    const empty = await send(svc, 'POST', SIGNUP);
    seen(expectEnvelope(t, empty, 400, 'invalid_request', 'no body at all'));
  });

  t.test('unsigned request to a signed route → 401 unauthorized', async (t) => {
    seen(expectEnvelope(t, await send(svc, 'GET', '/v1/services/whoami'), 401, 'unauthorized', 'unsigned whoami'));
  });
});

t.test('unexpected exception → 500 internal, details only in the log', async (t) => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      lines.push(...String(chunk).split('\n').filter(Boolean));
      cb();
    },
  });
  const log = pino({ level: 'info' }, sink);
  const svc = await startTestService(t, { log });

  // The service works, then its database changes behind its back.
  const ok = await send(
    svc,
    'POST',
    SIGNUP,
    JSON.stringify({ email: uniqueEmail(), password: 'correct horse battery' }),
  );
  t.equal(ok.status, 200, 'signup works before');
  await svc.running.storage.db.query('ALTER TABLE users RENAME TO users_gone');

  const res = await send(
    svc,
    'POST',
    SIGNUP,
    JSON.stringify({ email: uniqueEmail(), password: 'correct horse battery' }),
  );
  const requestId = expectEnvelope(t, res, 500, 'internal', 'signup with the users table gone');
  t.equal(res.body?.error?.details, undefined, 'no details');
  for (const leak of [
    /users/i,
    /relation/i,
    /insert/i,
    /select/i,
    /\bat\s+\S+\s*\(/,
    /\.ts:\d+/,
    /\.js:\d+/,
    /node_modules/,
    /stack/i,
  ]) {
    t.notMatch(res.text, leak, `body does not leak ${leak}`);
  }

  // pino writes synchronously to a plain stream, so the line is there by the time we got the answer.
  const entries = lines.map((l) => {
    try {
      return JSON.parse(l) as Record<string, unknown>;
    } catch {
      return {};
    }
  });
  const hit = entries.find((e) => e.requestId === requestId);
  t.ok(hit, `a log line carries requestId ${requestId}`);
  t.equal(hit?.level, 50, 'at level error');
  t.match(JSON.stringify(hit?.err ?? ''), /users/, 'the log line has the underlying error');

  // The process survived the exception.
  t.equal((await send(svc, 'GET', '/health')).status, 200, 'health still answers');
});

t.test('an unknown body field is refused by name, never dropped (docs/decisions.md #23)', async (t) => {
  const svc = await startTestService(t);
  const body = JSON.stringify({ email: uniqueEmail('unknown'), password: 'correct horse battery', nmae: 'x' });
  const r = await send(svc, 'POST', SIGNUP, body);
  expectEnvelope(t, r, 400, 'invalid_request', 'signup with a misspelt field');
  t.match(r.body.error.details, [{ field: 'body.nmae', message: 'is not a known field' }], 'names the field');
  t.match(r.body.error.message, /body\.nmae/, 'the message names it too');
  const login = JSON.stringify({ email: JSON.parse(body).email, password: 'correct horse battery' });
  const after = await send(svc, 'POST', '/auth/v1/login', login);
  t.equal(after.status, 401, 'nothing was created by the refused call');
});
