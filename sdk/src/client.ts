// The SDK's client. Its methods are built from the route table (./api), the one source of truth, so
// a route cannot exist without its method or the other way round (docs/api.md §1 rule 5):
//   client.<product>.<resource>.<action>(args)  ↔  /<product>/v1/<resource>/<action>
// `args` is one object: path parameters by name, then query fields (GET) or body fields.
// Nothing here is Node's own: it runs on Node 20 and in a browser alike.
import type { Static, TSchema } from '@sinclair/typebox';
import { routeTable, type RouteTable, type RouteSpec } from './api/index.js';
import { adminHeaders, hmacKey, signHeaders, type HmacKey, type Signer } from './signing.js';

/**
 * The error envelope of docs/api.md §7: every non-2xx answer becomes one of these. What never reached an
 * answer is one too, with `status` 0 and a code of the SDK's own (CLIENT_ERROR_CODES): `timeout` (the call's
 * `timeoutMs` ran out) or `network_error` (the connection failed, also on the last retry; `cause` holds why).
 */
export class SvcError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details?: unknown;
  readonly requestId?: string;
  constructor(
    status: number,
    code: string,
    message: string,
    details?: unknown,
    requestId?: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'SvcError';
    this.status = status;
    this.code = code;
    this.details = details;
    this.requestId = requestId;
  }
}

/** The codes of an SvcError raised by the SDK itself, never sent by the server (status 0). */
export const CLIENT_ERROR_CODES = ['timeout', 'network_error'] as const;

export type Credential = { keyId: string; secret: string } | { adminKey: string };

/** docs/api.md §8 bounds: a call gives up after this long, retries and their waits included. */
export const DEFAULT_TIMEOUT_MS = 30_000;
export const DEFAULT_MAX_RETRIES = 2;
export const DEFAULT_RETRY_BASE_MS = 500;
export const DEFAULT_RETRY_CAP_MS = 8_000;

/** What each call may set for itself; unset, the client's options hold. */
export interface CallOptions {
  /** Milliseconds for the whole call, retries and their waits included; 0 for no limit. */
  timeoutMs?: number;
  /** Aborting it stops the call (and any retry): the call rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Retries after the first attempt (see ClientOptions.maxRetries). */
  maxRetries?: number;
  /**
   * For a route whose body has an `idempotencyKey` (sendEmail, sendBatch, the test messages): 'auto' puts a new
   * UUID in a body that has none, so that the call may be retried; a string is the key itself.
   */
  idempotencyKey?: 'auto' | string;
}

export interface ClientOptions {
  baseUrl: string;
  credential?: Credential;
  fetch?: typeof fetch;
  /** Milliseconds since the epoch, for X-SVC-Timestamp (and to read a Retry-After date). */
  now?: () => number;
  /** Signs each request; `signHeaders` (WebCrypto) by default. */
  sign?: Signer;
  /** Milliseconds for a whole call, retries included; DEFAULT_TIMEOUT_MS by default, 0 for no limit. */
  timeoutMs?: number;
  /**
   * Retries of a call that may be sent again (an idempotent method, RFC 9110 §9.2.2, or a POST whose body carries
   * an `idempotencyKey`) after a 429 (not `quota_exceeded`, a daily cap), a 5xx or a network error. Never after
   * any other 4xx. DEFAULT_MAX_RETRIES by default; 0 turns retries off.
   */
  maxRetries?: number;
  /** Backoff: the nth retry waits a random time up to min(retryCapMs, retryBaseMs × 2^(n-1)), or Retry-After. */
  retryBaseMs?: number;
  retryCapMs?: number;
  /** 'auto': every call of a route with an `idempotencyKey` body field gets a new UUID when it brings none. */
  idempotencyKey?: 'auto';
}

/** A fresh idempotency key for sendEmail or sendBatch (docs/api.md §8: 8 to 128 characters): a random UUID. */
export const newIdempotencyKey = (): string => crypto.randomUUID();

/** RFC 9110 §9.2.2: the methods a client may send again after a failure without changing the outcome. */
const IDEMPOTENT = new Set(['GET', 'HEAD', 'PUT', 'DELETE', 'OPTIONS']);

/** RFC 9110 §10.2.3: Retry-After is delay-seconds or an HTTP-date. Milliseconds to wait, or undefined. */
export function retryAfterMs(value: string | null, nowMs: number): number | undefined {
  if (value === null) return undefined;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

type S<T> = T extends TSchema ? Static<T> : unknown;
type ArgsOf<R extends RouteSpec> = S<R['params']> & S<R['query']> & S<R['body']>;
type MethodOf<R extends RouteSpec> =
  {} extends ArgsOf<R>
    ? (args?: ArgsOf<R>, options?: CallOptions) => Promise<Static<R['response']>>
    : (args: ArgsOf<R>, options?: CallOptions) => Promise<Static<R['response']>>;
type Nest<N extends string, V> = N extends `${infer H}.${infer T}` ? { [K in H]: Nest<T, V> } : { [K in N]: V };
type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;
type Names = keyof RouteTable & string;

export type Client = UnionToIntersection<{ [K in Names]: Nest<K, MethodOf<RouteTable[K]>> }[Names]> & {
  /**
   * A raw call, for what the typed methods do not cover; throws SvcError on non-2xx. Retried like a typed call
   * when its method is idempotent or its body is an object with an `idempotencyKey`.
   */
  request(method: string, target: string, body?: unknown, options?: CallOptions): Promise<unknown>;
};

/** Why the call's controller was aborted: its deadline, not the caller's signal. */
class Deadline extends Error {}

export function createClient(opts: ClientOptions): Client {
  const base = opts.baseUrl.replace(/\/+$/, '');
  const doFetch = opts.fetch ?? fetch;
  const now = opts.now ?? Date.now;
  const sign = opts.sign ?? signHeaders;
  const cred = opts.credential;
  // The default signer takes the imported key, made once for the client's credential.
  let key: Promise<HmacKey> | undefined;
  const secretOf = (c: { secret: string }) => (opts.sign ? c.secret : (key ??= hmacKey(c.secret)));

  /** One attempt: signed afresh (new timestamp and nonce; docs/api.md §5.1 refuses a replayed nonce). */
  async function attempt(method: string, target: string, raw: string, signal: AbortSignal) {
    const headers: Record<string, string> = raw ? { 'content-type': 'application/json' } : {};
    if (cred && 'adminKey' in cred) Object.assign(headers, adminHeaders(cred.adminKey));
    else if (cred) {
      const secret = await secretOf(cred);
      Object.assign(
        headers,
        await sign({ method, target, body: raw, keyId: cred.keyId, secret, timestamp: String(now()) }),
      );
    }
    const res = await doFetch(base + target, { method, headers, body: raw || undefined, signal });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    return { res, json };
  }

  async function request(method: string, target: string, body?: unknown, o: CallOptions = {}): Promise<unknown> {
    const raw = body === undefined ? '' : JSON.stringify(body);
    const keyed =
      typeof body === 'object' && body !== null && typeof (body as Record<string, unknown>).idempotencyKey === 'string';
    const retriable = IDEMPOTENT.has(method.toUpperCase()) || keyed;
    const maxRetries = retriable ? Math.max(0, o.maxRetries ?? opts.maxRetries ?? DEFAULT_MAX_RETRIES) : 0;
    const baseMs = opts.retryBaseMs ?? DEFAULT_RETRY_BASE_MS;
    const capMs = opts.retryCapMs ?? DEFAULT_RETRY_CAP_MS;
    const timeoutMs = o.timeoutMs ?? opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const what = `${method} ${target.split('?')[0]}`;

    // One controller for the call: the caller's signal and the deadline both abort it, and with it the fetch,
    // the reading of the answer and any wait between attempts.
    const call = new AbortController();
    const started = Date.now();
    const deadline = timeoutMs > 0 ? started + timeoutMs : Infinity;
    const onAbort = () => call.abort(o.signal?.reason);
    if (o.signal?.aborted) throw o.signal.reason;
    o.signal?.addEventListener('abort', onAbort, { once: true });
    const timer =
      timeoutMs > 0
        ? setTimeout(() => call.abort(new Deadline(`${what}: no answer within ${timeoutMs} ms`)), timeoutMs)
        : undefined;
    const stopped = (): never => {
      const reason: unknown = call.signal.reason;
      if (reason instanceof Deadline)
        throw new SvcError(0, 'timeout', reason.message, undefined, undefined, { cause: reason });
      throw reason;
    };
    const wait = (ms: number) =>
      new Promise<void>((resolve) => {
        const t = setTimeout(done, ms);
        function done() {
          clearTimeout(t);
          call.signal.removeEventListener('abort', done);
          resolve();
        }
        call.signal.addEventListener('abort', done, { once: true });
      });

    try {
      for (let n = 0; ; n++) {
        let failure: SvcError;
        let after: number | undefined;
        try {
          const { res, json } = await attempt(method, target, raw, call.signal);
          if (res.ok) return json;
          const e = (
            json as { error?: { code?: string; message?: string; details?: unknown; requestId?: string } } | undefined
          )?.error;
          failure = new SvcError(
            res.status,
            e?.code ?? 'http_error',
            e?.message ?? `HTTP ${res.status}`,
            e?.details,
            e?.requestId ?? res.headers.get('x-request-id') ?? undefined,
          );
          // Only a 429 that waiting can cure (never quota_exceeded, the daily cap) and a 5xx; no other 4xx.
          const again = (res.status === 429 && failure.code !== 'quota_exceeded') || res.status >= 500;
          if (!again || n >= maxRetries) throw failure;
          after =
            res.status === 429 || res.status === 503 ? retryAfterMs(res.headers.get('retry-after'), now()) : undefined;
        } catch (err) {
          if (call.signal.aborted) stopped();
          if (err instanceof SvcError) throw err;
          // No answer: the request may or may not have taken effect, so only a retriable call is sent again.
          failure = new SvcError(
            0,
            'network_error',
            `${what}: ${(err as Error)?.message ?? String(err)}`,
            undefined,
            undefined,
            {
              cause: err,
            },
          );
          if (n >= maxRetries) throw failure;
        }
        // Full jitter over an exponential ceiling, so that clients refused together do not return together.
        const ms = after ?? Math.random() * Math.min(capMs, baseMs * 2 ** n);
        // A wait that would outlast the call's deadline is not worth starting: the last failure is the answer.
        if (Date.now() + ms >= deadline) throw failure;
        await wait(ms);
        if (call.signal.aborted) stopped();
      }
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener('abort', onAbort);
    }
  }

  const client: Record<string, unknown> = { request };
  for (const [name, spec] of Object.entries(routeTable) as [string, RouteSpec][]) {
    const parts = name.split('.');
    let node = client;
    for (const p of parts.slice(0, -1)) node = (node[p] ??= {}) as Record<string, unknown>;
    node[parts[parts.length - 1] as string] = (args: Record<string, unknown> = {}, options?: CallOptions) =>
      call(spec, args, options);
  }

  function call(spec: RouteSpec, args: Record<string, unknown>, o: CallOptions = {}): Promise<unknown> {
    const rest = { ...args };
    // The key is made once per call, before the first attempt: every retry carries the same one.
    const auto = o.idempotencyKey ?? opts.idempotencyKey;
    if (auto && spec.body?.properties.idempotencyKey && rest.idempotencyKey === undefined)
      rest.idempotencyKey = auto === 'auto' ? newIdempotencyKey() : auto;
    const path = spec.path.replace(/\{(\w+)\}/g, (_, k: string) => {
      const v = rest[k];
      delete rest[k];
      if (v === undefined || v === null)
        throw new TypeError(`missing path parameter ${k} for ${spec.method} ${spec.path}`);
      return encodeURIComponent(String(v));
    });
    const queryKeys = new Set(Object.keys(spec.query?.properties ?? {}));
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(rest)) {
      if (v === undefined || !(queryKeys.has(k) || !spec.body)) continue;
      query.set(k, String(v));
      delete rest[k];
    }
    const qs = query.toString();
    return request(spec.method, qs ? `${path}?${qs}` : path, spec.body ? rest : undefined, o);
  }

  return client as Client;
}
