// A TCP listener that accepts connections and never says a word: an MX host that is up at the TCP level but
// dead above it (the client waits for a greeting until its timeout). It counts the connections it accepted,
// so a test can tell how often the MTA dialled it.
//
//   const pit = await startTarpit(t, '127.0.0.3', sink.port);
//   ... pit.accepted
import net from 'node:net';

export interface Tarpit {
  host: string;
  port: number;
  /** Connections accepted so far. */
  accepted: number;
  close(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** Listens on host:port (port 0: any free one); 127.0.0.0/8 addresses other than 127.0.0.1 work on Linux. */
export async function startTarpit(t: Teardown, host = '127.0.0.1', port = 0): Promise<Tarpit> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    pit.accepted++;
    sockets.add(s);
    s.on('error', () => {});
    s.on('close', () => sockets.delete(s));
  });
  const pit: Tarpit = {
    host,
    port,
    accepted: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  pit.port = (server.address() as net.AddressInfo).port;
  t.teardown(() => pit.close());
  return pit;
}
