// The TypeScript SDK. Its methods are built from the server's route table (control/api), the one
// source of truth, so a route cannot exist without its method or the other way round:
//   client.<product>.<resource>.<action>(args)  ↔  /<product>/v1/<resource>/<action>
// `args` is one object: path parameters by name, then query fields (GET) or body fields.
import { randomUUID } from 'node:crypto';
import type { Static, TSchema } from '@sinclair/typebox';
import { routeTable, type RouteTable, type RouteSpec } from '../../control/api/index.js';
import {
  authorizationHeader,
  HEADER_ADMIN_KEY,
  HEADER_NONCE,
  HEADER_TIMESTAMP,
  sha256Hex,
  signature,
  stringToSign,
} from '../../control/api/signing.js';

export { routeTable };
export type { RouteTable };

/** The spec §7 error: every non-2xx answer becomes one of these. */
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
}

export interface SignInput {
  method: string;
  target: string;
  body: string;
  keyId: string;
  secret: string;
  timestamp?: string;
  nonce?: string;
}

/** The headers of spec §5.1 for one request. */
export function signHeaders(s: SignInput): Record<string, string> {
  const timestamp = s.timestamp ?? String(Date.now());
  const nonce = s.nonce ?? randomUUID();
  const sig = signature(s.secret, stringToSign(s.method, s.target, timestamp, nonce, sha256Hex(s.body)));
  return { authorization: authorizationHeader(s.keyId, sig), [HEADER_TIMESTAMP]: timestamp, [HEADER_NONCE]: nonce };
}

export function adminHeaders(adminKey: string): Record<string, string> {
  return { authorization: 'SVC-HMAC-SHA256 Credential=admin, Signature=bootstrap', [HEADER_ADMIN_KEY]: adminKey };
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

  async function request(method: string, target: string, body?: unknown): Promise<unknown> {
    const raw = body === undefined ? '' : JSON.stringify(body);
    const headers: Record<string, string> = raw ? { 'content-type': 'application/json' } : {};
    const cred = opts.credential;
    if (cred && 'adminKey' in cred) Object.assign(headers, adminHeaders(cred.adminKey));
    else if (cred)
      Object.assign(
        headers,
        signHeaders({ method, target, body: raw, keyId: cred.keyId, secret: cred.secret, timestamp: String(now()) }),
      );
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
