// A TCP proxy to Postgres that loses the reply to a statement after Postgres committed it: the fault of a
// connection reset after COMMIT, for tests of what a client does when it cannot know whether its write landed.
//
//   const proxy = await cuttingProxy(new URL(database.url), 'INSERT INTO messages (');
//   ... point the service (or a Db) at 127.0.0.1:proxy.port, then proxy.state.armed = true
import net from 'node:net';

/**
 * Armed, it watches each connection for a statement whose text holds `marker` (sent in its Parse message: a
 * statement already prepared on that connection is not seen) and then, when the client sends COMMIT (or, outside
 * a transaction, right after that statement), forwards it and drops the server's answer, closing both sides.
 */
export async function cuttingProxy(upstream: URL, marker: string) {
  const state = { armed: false, cuts: 0 };
  const server = net.createServer((client) => {
    const pgSocket = net.connect(Number(upstream.port || 5432), upstream.hostname);
    let phase: 'watch' | 'sawStatement' | 'cut' = 'watch';
    let inTx = false;
    const close = () => {
      client.destroy();
      pgSocket.destroy();
    };
    client.on('error', close);
    pgSocket.on('error', close);
    client.on('data', (d: Buffer) => {
      const text = d.toString('latin1');
      if (state.armed && phase === 'watch') {
        if (/\bBEGIN\b/.test(text)) inTx = true;
        if (text.includes(marker)) {
          phase = inTx ? 'sawStatement' : 'cut';
          if (phase === 'cut') state.armed = false;
        }
      } else if (phase === 'sawStatement' && /\bCOMMIT\b/.test(text)) {
        phase = 'cut';
        state.armed = false;
      }
      pgSocket.write(d);
    });
    pgSocket.on('data', (d: Buffer) => {
      if (phase === 'cut') {
        // The statement ran and committed; its answer never arrives.
        state.cuts++;
        close();
        return;
      }
      client.write(d);
    });
    client.on('close', () => pgSocket.destroy());
    pgSocket.on('close', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { state, port: (server.address() as net.AddressInfo).port, close: () => server.close() };
}
