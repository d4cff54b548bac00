// The SDK's client. Its methods are built from the route table (./api), the one source of truth, so
// a route cannot exist without its method or the other way round (docs/api.md §1 rule 5):
//   client.<product>.<resource>.<action>(args)  ↔  /<product>/v1/<resource>/<action>
// `args` is one object: path parameters by name, then query fields (GET) or body fields.
// Nothing here is Node's own: it runs on Node 20 and in a browser alike.
import type { Static, TSchema } from '@sinclair/typebox';
import { routeTable, type RouteTable, type RouteSpec } from './api/index.js';
import { adminHeaders, hmacKey, signHeaders, type HmacKey, type Signer } from './signing.js';

/** The error envelope of docs/api.md §7: every non-2xx answer becomes one of these. */
export class SvcError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
    readonly requestId?: string,
  ) {
    super(message);
    this.name = 'SvcError';
  }
}

export type Credential = { keyId: string; secret: string } | { adminKey: string };

export interface ClientOptions {
  baseUrl: string;
  credential?: Credential;
  fetch?: typeof fetch;
  /** Milliseconds since the epoch, for X-SVC-Timestamp. */
  now?: () => number;
  /** Signs each request; `signHeaders` (WebCrypto) by default. */
  sign?: Signer;
}

type S<T> = T extends TSchema ? Static<T> : unknown;
type ArgsOf<R extends RouteSpec> = S<R['params']> & S<R['query']> & S<R['body']>;
type MethodOf<R extends RouteSpec> =
  {} extends ArgsOf<R>
    ? (args?: ArgsOf<R>) => Promise<Static<R['response']>>
    : (args: ArgsOf<R>) => Promise<Static<R['response']>>;
type Nest<N extends string, V> = N extends `${infer H}.${infer T}` ? { [K in H]: Nest<T, V> } : { [K in N]: V };
type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;
type Names = keyof RouteTable & string;

export type Client = UnionToIntersection<{ [K in Names]: Nest<K, MethodOf<RouteTable[K]>> }[Names]> & {
  /** A raw call, for what the typed methods do not cover; throws SvcError on non-2xx. */
  request(method: string, target: string, body?: unknown): Promise<unknown>;
};

export function createClient(opts: ClientOptions): Client {
  const base = opts.baseUrl.replace(/\/+$/, '');
  const doFetch = opts.fetch ?? fetch;
  const now = opts.now ?? Date.now;
  const sign = opts.sign ?? signHeaders;
  const cred = opts.credential;
  // The default signer takes the imported key, made once for the client's credential.
  let key: Promise<HmacKey> | undefined;
  const secretOf = (c: { secret: string }) => (opts.sign ? c.secret : (key ??= hmacKey(c.secret)));

  async function request(method: string, target: string, body?: unknown): Promise<unknown> {
    const raw = body === undefined ? '' : JSON.stringify(body);
    const headers: Record<string, string> = raw ? { 'content-type': 'application/json' } : {};
    if (cred && 'adminKey' in cred) Object.assign(headers, adminHeaders(cred.adminKey));
    else if (cred) {
      const secret = await secretOf(cred);
      Object.assign(
        headers,
        await sign({ method, target, body: raw, keyId: cred.keyId, secret, timestamp: String(now()) }),
      );
    }
    const res = await doFetch(base + target, { method, headers, body: raw || undefined });
    const text = await res.text();
    let json: unknown;
    try {
      json = text ? JSON.parse(text) : undefined;
    } catch {
      json = undefined;
    }
    if (!res.ok) {
      const e = (
        json as { error?: { code?: string; message?: string; details?: unknown; requestId?: string } } | undefined
      )?.error;
      throw new SvcError(
        res.status,
        e?.code ?? 'http_error',
        e?.message ?? `HTTP ${res.status}`,
        e?.details,
        e?.requestId ?? res.headers.get('x-request-id') ?? undefined,
      );
    }
    return json;
  }

  const client: Record<string, unknown> = { request };
  for (const [name, spec] of Object.entries(routeTable) as [string, RouteSpec][]) {
    const parts = name.split('.');
    let node = client;
    for (const p of parts.slice(0, -1)) node = (node[p] ??= {}) as Record<string, unknown>;
    node[parts[parts.length - 1] as string] = (args: Record<string, unknown> = {}) => call(spec, args);
  }

  function call(spec: RouteSpec, args: Record<string, unknown>): Promise<unknown> {
    const rest = { ...args };
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
    return request(spec.method, qs ? `${path}?${qs}` : path, spec.body ? rest : undefined);
  }

  return client as Client;
}
