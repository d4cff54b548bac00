// One webhook request: POST the body to the URL, connected to the address already checked
// (target.ts), within a deadline that covers connecting, TLS, sending and the answer's headers.
// Redirects are not followed (a 3xx is a failed attempt): a redirect could lead anywhere, the
// internal network included.
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';

export type PostResult =
  { kind: 'answered'; statusCode: number; latencyMs: number } | { kind: 'failed'; error: string; latencyMs: number };

export interface PostRequest {
  url: URL;
  /** The checked address to connect to; TLS still verifies the certificate for the URL's host. */
  address: string;
  family: 4 | 6;
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  /** Aborts the request (the dispatcher stopping). */
  signal?: AbortSignal;
}

const USER_AGENT = 'svc-mail-webhooks/1';

export function postWebhook(r: PostRequest): Promise<PostResult> {
  const started = performance.now();
  const latency = () => Math.round(performance.now() - started);
  // The name is never resolved again: every lookup answers the checked address.
  const lookup: LookupFunction = (_host, options, callback) => {
    if ((options as { all?: boolean }).all)
      (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
        { address: r.address, family: r.family },
      ]);
    else callback(null, r.address, r.family);
  };
  const mod = r.url.protocol === 'https:' ? https : http;
  const body = Buffer.from(r.body, 'utf8');
  return new Promise<PostResult>((resolve) => {
    let settled = false;
    const settle = (v: PostResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      r.signal?.removeEventListener('abort', onAbort);
      resolve(v);
    };
    const req = mod.request({
      protocol: r.url.protocol,
      hostname: r.url.hostname.replace(/^\[|\]$/g, ''),
      port: r.url.port || undefined,
      path: `${r.url.pathname}${r.url.search}`,
      method: 'POST',
      // A connection per request: an agent would pool sockets by host name, whatever address they reached.
      agent: false,
      lookup,
      headers: { ...r.headers, 'user-agent': USER_AGENT, 'content-length': String(body.length) },
    });
    const timer = setTimeout(() => {
      settle({ kind: 'failed', error: `no answer within ${r.timeoutMs / 1000} s`, latencyMs: latency() });
      req.destroy();
    }, r.timeoutMs);
    const onAbort = () => {
      settle({ kind: 'failed', error: 'aborted', latencyMs: latency() });
      req.destroy();
    };
    if (r.signal?.aborted) onAbort();
    else r.signal?.addEventListener('abort', onAbort, { once: true });
    req.on('response', (res) => {
      settle({ kind: 'answered', statusCode: res.statusCode ?? 0, latencyMs: latency() });
      // The body is not needed: read what comes, then close (a receiver that never ends its body
      // must not hold the socket open).
      res.on('error', () => {});
      res.resume();
      const closer = setTimeout(() => req.destroy(), 1_000);
      closer.unref();
      res.on('end', () => clearTimeout(closer));
    });
    req.on('error', (err) => settle({ kind: 'failed', error: describe(err), latencyMs: latency() }));
    req.end(body);
  });
}

function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message;
}
