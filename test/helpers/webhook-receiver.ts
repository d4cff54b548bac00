// A webhook receiver on 127.0.0.1 (node:http) that checks every request's signature with its own
// implementation of the Standard Webhooks algorithm (https://www.standardwebhooks.com), written here
// from the specification and not imported from the service, so a mistake in ours cannot hide itself.
// It records each request and answers as the test says: a status code, or 'hang' (never answer
// until released or closed).
//
//   const hook = await startWebhookReceiver(t);
//   const { secret } = await client.console.projects.webhooks.create({ id, url: hook.url });
//   hook.secret = secret;
import http from 'node:http';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { waitFor } from './wait-for.js';

export interface ReceivedHook {
  path: string;
  headers: http.IncomingHttpHeaders;
  id: string;
  timestamp: number;
  body: string;
  json: { type: string; createdAt: string; data: Record<string, unknown> };
  /** Whether some v1 signature of the header matched (checked against `secret` when the request came). */
  signatureValid: boolean;
  /** Real time the request arrived (Date.now()). */
  arrivedMs: number;
  /** What it was answered. */
  answer: number | 'hang';
}

export type Answer = (hook: ReceivedHook, index: number) => number | 'hang';

export interface WebhookReceiver {
  port: number;
  /** http://127.0.0.1:<port><path> */
  url(path?: string): string;
  /** The whsec_ secret requests are checked with (several endpoints may share a receiver: by path). */
  secret: string;
  secrets: Record<string, string>;
  answer: Answer;
  hooks: ReceivedHook[];
  /** Requests being answered now (hanging ones included), and the most ever at once, per path. */
  open: Map<string, number>;
  maxOpen: Map<string, number>;
  on(path: string): ReceivedHook[];
  waitFor(n: number, path?: string, timeoutMs?: number): Promise<ReceivedHook[]>;
  /** Answers every hanging request with this status. */
  release(status?: number): void;
  close(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/**
 * Standard Webhooks verification: the key is the base64 after `whsec_`; the signed content is
 * `${id}.${timestamp}.${body}`; the header is a space-separated list of `v1,<base64 HMAC-SHA256>`,
 * any of which may match (key rotation); compared in constant time.
 */
export function verifyStandardWebhook(
  secret: string,
  id: string,
  timestamp: string,
  body: string,
  header: string,
): boolean {
  if (!secret.startsWith('whsec_')) return false;
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const expected = createHmac('sha256', key).update(`${id}.${timestamp}.${body}`).digest();
  return header.split(' ').some((part) => {
    const [version, sig] = part.split(',');
    if (version !== 'v1' || !sig) return false;
    const got = Buffer.from(sig, 'base64');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
}

export async function startWebhookReceiver(t: Teardown, answer: Answer = () => 200): Promise<WebhookReceiver> {
  const hanging = new Set<http.ServerResponse>();
  const r: WebhookReceiver = {
    port: 0,
    url: (path = '/hook') => `http://127.0.0.1:${r.port}${path}`,
    secret: '',
    secrets: {},
    answer,
    hooks: [],
    open: new Map(),
    maxOpen: new Map(),
    on: (path) => r.hooks.filter((h) => h.path === path),
    waitFor: (n, path, timeoutMs = 20_000) =>
      waitFor(
        () => {
          const got = path ? r.on(path) : r.hooks;
          return got.length >= n ? got : null;
        },
        { timeoutMs, what: `${n} webhook requests${path ? ` on ${path}` : ''}` },
      ),
    release(status = 200) {
      for (const res of hanging) res.writeHead(status).end();
      hanging.clear();
    },
    async close() {
      for (const res of hanging) res.destroy();
      hanging.clear();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '/';
      const body = Buffer.concat(chunks).toString('utf8');
      const header = (name: string) => String(req.headers[name] ?? '');
      const secret = r.secrets[path] ?? r.secret;
      const hook: ReceivedHook = {
        path,
        headers: req.headers,
        id: header('webhook-id'),
        timestamp: Number(header('webhook-timestamp')),
        body,
        json: JSON.parse(body || 'null'),
        signatureValid: verifyStandardWebhook(
          secret,
          header('webhook-id'),
          header('webhook-timestamp'),
          body,
          header('webhook-signature'),
        ),
        arrivedMs: Date.now(),
        answer: 200,
      };
      hook.answer = r.answer(hook, r.on(path).length);
      r.hooks.push(hook);
      const n = (r.open.get(path) ?? 0) + 1;
      r.open.set(path, n);
      r.maxOpen.set(path, Math.max(n, r.maxOpen.get(path) ?? 0));
      res.on('close', () => r.open.set(path, (r.open.get(path) ?? 1) - 1));
      if (hook.answer === 'hang') hanging.add(res);
      else res.writeHead(hook.answer, { 'content-type': 'text/plain' }).end('ok');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  r.port = (server.address() as { port: number }).port;
  t.teardown(() => r.close());
  return r;
}
