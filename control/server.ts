// Binds the control plane on SVC_BIND_HOST:SVC_HTTP_PORT (port 0 in tests) and closes it gracefully.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import type { AddressInfo, Socket } from 'node:net';
import type Koa from 'koa';

export interface HttpListener {
  port: number;
  /** Stops accepting, lets in-flight requests finish, closes idle keep-alive connections. */
  close(): Promise<void>;
}

export interface HttpLimits {
  /** SVC_HTTP_MAX_CONNECTIONS: past it, a new connection is closed at once. */
  maxConnections: number;
}

export async function listenHttp(app: Koa, host: string, port: number, limits: HttpLimits): Promise<HttpListener> {
  const server = http.createServer(app.callback());
  server.maxConnections = limits.maxConnections;
  // Longer than common load balancers' idle timeout (60 s), so they close first and never race us.
  server.keepAliveTimeout = 65_000;
  // A client must send its whole header block within 70 s and its whole request within 120 s (Node answers
  // 408 then): a slow sender holds a connection that long at most.
  server.headersTimeout = 70_000;
  server.requestTimeout = 120_000;
  server.on('clientError', answerClientError);
  return serve(server, host, port);
}

/** Listens on host:port (0: any free port) and answers the bound port and a graceful close. */
export async function serve(server: http.Server, host: string, port: number): Promise<HttpListener> {
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

// Requests that Node's HTTP parser refuses (oversized headers, malformed request lines) never reach
// Koa; they still get the error envelope of docs/decisions.md #1, then the connection closes.
function answerClientError(err: NodeJS.ErrnoException, socket: Socket): void {
  if (!socket.writable || err.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const [status, reason, code, message] = tooLarge
    ? [431, 'Request Header Fields Too Large', 'invalid_request', 'Request headers are too large.']
    : [400, 'Bad Request', 'invalid_request', 'Malformed HTTP request.'];
  const requestId = randomUUID();
  const body = JSON.stringify({ error: { code, message, requestId } });
  socket.end(
    `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nX-Request-Id: ${requestId}\r\nConnection: close\r\n\r\n${body}`,
  );
}
