// The MTA role's Prometheus listener on SVC_METRICS_PORT (docs/operations.md, "Metrics"): GET /metrics and
// nothing else, for the networks of SVC_METRICS_CIDRS; everything else is 404. It lives with the composition
// because the MTA itself serves no HTTP (docs/architecture.md, import rules); no proxy is expected in front of
// it, so the socket's address is the client.
import http from 'node:http';
import type { Logger } from 'pino';
import { networks } from '../mail/client-address.js';
import { serve, type HttpListener } from '../control/server.js';
import type { Scrape } from '../control/middleware/ops.js';

export type MetricsListener = HttpListener;

export async function listenMetrics(
  registry: Scrape,
  opts: { host: string; port: number; cidrs: readonly string[]; log: Logger },
): Promise<MetricsListener> {
  const allowed = networks(opts.cidrs);
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (req.method !== 'GET' || path !== '/metrics' || !allowed(req.socket.remoteAddress ?? '')) {
      res.writeHead(404, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Not found\n');
      return;
    }
    registry.metrics().then(
      (text) => res.writeHead(200, { 'Content-Type': registry.contentType, 'Cache-Control': 'no-store' }).end(text),
      (err: unknown) => {
        opts.log.error({ err }, 'metrics scrape failed');
        res.writeHead(500, { 'Content-Type': 'text/plain; charset=utf-8' }).end('Internal error\n');
      },
    );
  });
  // A scraper asks every few seconds: short timeouts, and the connection count of a small listener.
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.maxConnections = 64;
  return serve(server, opts.host, opts.port);
}
