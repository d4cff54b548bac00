// Binds the control plane on SVC_BIND_HOST:SVC_HTTP_PORT (port 0 in tests) and closes it gracefully.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type Koa from 'koa';

export interface HttpListener {
  port: number;
  /** Stops accepting, lets in-flight requests finish, closes idle keep-alive connections. */
  close(): Promise<void>;
}

export async function listenHttp(app: Koa, host: string, port: number): Promise<HttpListener> {
  const server = http.createServer(app.callback());
  // Longer than common load balancers' idle timeout (60 s), so they close first and never race us.
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 70_000;
  server.requestTimeout = 120_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
