// The IMAP listener (docs/architecture.md, the `imap` role): one TCP connection, one session, one command
// at a time. Bytes go into the reader (imap/reader.ts); each whole command goes to the dispatcher
// (imap/commands.ts) while the socket is paused, so a client that pipelines or floods costs us at most
// what the reader's limits allow; responses go out in order through session.send.
//
// What one client may cost: before login the reader holds no literal over MAX_LITERAL_BYTES (an APPEND
// literal included), and the connection caps (overall and per client address) refuse the rest with BYE
// (RFC 3501 §7.1.5). No handler keeps a database transaction or lock across a socket write or a client
// read, so a slow or vanished client holds nothing; an exception in one session ends only that one.
//
// TLS (RFC 3501 §6.2.1, RFC 8314): with a certificate, the listener offers STARTTLS and, before it, refuses
// LOGIN and AUTHENTICATE and advertises LOGINDISABLED (RFC 3501 §6.2.3), except to clients for which
// `plaintextAuthFrom` says a password in the clear is acceptable (loopback by default). An implicit-TLS
// listener (`implicitTlsPort`) starts every session secure. The certificate is read at each handshake, so
// a reload (SIGHUP) applies to the next connection.
import net from 'node:net';
import tls, { type SecureContext } from 'node:tls';
import type { Logger } from 'pino';
import type { MailboxBackend } from './backend.js';
import { capabilities, dispatch, refusalResponse } from './commands.js';
import { AUTOLOGOUT_MS, DEFAULT_APPEND_LIMIT, MAX_LITERAL_BYTES } from './limits.js';
import { CommandReader, type RawCommand } from './reader.js';
import { continuation, statusResponse } from './response.js';
import type { Session, SessionConfig } from './session.js';

export interface ImapServerOptions {
  host: string;
  port: number;
  /** Connections at once, all clients together. */
  maxConnections?: number;
  /** Connections at once from one client address (Dovecot's mail_max_userip_connections is 10 per user). */
  maxConnectionsPerIp?: number;
  /** RFC 3501 §5.4: at least 30 minutes; lower only in tests. */
  autologoutMs?: number;
  /** Every failed login is answered this long after it began (SessionConfig.loginFailureDelayMs). */
  loginFailureDelayMs?: number;
  appendLimit?: number;
  serverVersion?: string;
  /** How long close() lets commands in flight finish before it cuts the connections. */
  drainMs?: number;
  /** The certificate (config/tls.ts): STARTTLS and the implicit-TLS listener need it; null offers neither. */
  tls?: CertificateSource | null;
  /** RFC 8314 §3.3: a second listener whose connections speak TLS from the first byte (SVC_IMAPS_PORT). */
  implicitTlsPort?: number | null;
  /** Clients that may log in without TLS while a certificate is configured; default: loopback addresses. */
  plaintextAuthFrom?: (ip: string) => boolean;
}

/** What the listener needs of the configured certificate: the current one, and word of a new one. */
export interface CertificateSource {
  current(): { context: SecureContext; key: Buffer; cert: Buffer };
  onChange(listener: (c: { key: Buffer; cert: Buffer }) => void): () => void;
}

/** 127.0.0.0/8 and ::1, also in their IPv4-mapped form: a password sent there never leaves the host. */
export function isLoopback(ip: string): boolean {
  const v4 = ip.startsWith('::ffff:') ? ip.slice(7) : ip;
  return v4.startsWith('127.') || ip === '::1';
}

export interface ImapServer {
  port: number;
  /** The implicit-TLS listener's port, when there is one. */
  tlsPort: number | null;
  /** Open connections now. */
  connections(): number;
  /** Stops accepting, says BYE to every session (after its command in flight), then closes. */
  close(): Promise<void>;
}

export const DEFAULTS = {
  maxConnections: 2000,
  maxConnectionsPerIp: 20,
  loginFailureDelayMs: 1000,
  drainMs: 5000,
};

/**
 * What a command may have written and the client not yet read before it waits (Session.writable): above
 * the socket's 16 KiB mark, so that a FETCH of many bodies leaves in writes of many responses each.
 */
const WRITE_BUFFER = 256 * 1024;
const NO_BYTES = Buffer.alloc(0);

interface Connection {
  /** Says BYE (now, or after the command in flight) and ends the connection. */
  shutdown(reason: string): void;
  destroy(): void;
}

export async function listenImap(log: Logger, backend: MailboxBackend, opts: ImapServerOptions): Promise<ImapServer> {
  const maxConnections = opts.maxConnections ?? DEFAULTS.maxConnections;
  const maxPerIp = opts.maxConnectionsPerIp ?? DEFAULTS.maxConnectionsPerIp;
  const certificate = opts.tls ?? null;
  const config: SessionConfig = {
    appendLimit: opts.appendLimit ?? DEFAULT_APPEND_LIMIT,
    tlsAvailable: certificate !== null,
    allowPlaintextAuth: true,
    serverName: 'svc-mail',
    serverVersion: opts.serverVersion ?? '0.1.0',
    loginFailureDelayMs: opts.loginFailureDelayMs ?? DEFAULTS.loginFailureDelayMs,
  };
  // Without a certificate there is no other way to log in; with one, only the clients it names may do so in
  // the clear. One config each way, shared by every session.
  const cleartextConfig: SessionConfig = { ...config, allowPlaintextAuth: false };
  const plaintextAuthFrom = opts.plaintextAuthFrom ?? isLoopback;
  const autologoutMs = opts.autologoutMs ?? AUTOLOGOUT_MS;
  const open = new Set<Connection>();
  const perIp = new Map<string, number>();
  let closing = false;

  const accept = (secure: boolean) => (socket: net.Socket) => {
    const ip = socket.remoteAddress ?? 'unknown';
    if (closing || open.size >= maxConnections || (perIp.get(ip) ?? 0) >= maxPerIp) {
      // RFC 3501 §7.1.5: BYE as the greeting when the server will not serve this client.
      socket.on('error', () => {});
      socket.end(statusResponse(null, 'BYE', closing ? 'server shutting down' : 'too many connections'));
      return;
    }
    perIp.set(ip, (perIp.get(ip) ?? 0) + 1);
    const sessionConfig = certificate && !secure && !plaintextAuthFrom(ip) ? cleartextConfig : config;
    const conn = serve(socket, ip, secure, {
      backend,
      config: sessionConfig,
      autologoutMs,
      log,
      secureContext: () => certificate?.current().context ?? null,
    });
    open.add(conn);
    socket.once('close', () => {
      open.delete(conn);
      const n = (perIp.get(ip) ?? 1) - 1;
      if (n > 0) perIp.set(ip, n);
      else perIp.delete(ip);
    });
  };

  const listen = async (server: net.Server, port: number) => {
    server.on('error', (err) => log.error({ err }, 'imap listener error'));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, opts.host, () => {
        server.off('error', reject);
        resolve();
      });
    });
    return (server.address() as net.AddressInfo).port;
  };
  const server = net.createServer(accept(false));
  const servers: net.Server[] = [server];
  let tlsPort: number | null = null;
  let unsubscribe = () => {};
  const port = await listen(server, opts.port);
  if (certificate && opts.implicitTlsPort != null) {
    const { key, cert } = certificate.current();
    // A failed handshake never reaches accept(): it costs no session and no connection slot.
    const tlsServer = tls.createServer({ key, cert }, accept(true));
    tlsServer.on('tlsClientError', (err, s) => log.debug({ err, ip: s.remoteAddress }, 'imaps handshake failed'));
    unsubscribe = certificate.onChange((c) => tlsServer.setSecureContext({ key: c.key, cert: c.cert }));
    servers.push(tlsServer);
    tlsPort = await listen(tlsServer, opts.implicitTlsPort).catch((err) => {
      unsubscribe();
      server.close();
      throw err;
    });
  }

  return {
    port,
    tlsPort,
    connections: () => open.size,
    async close() {
      if (closing) return;
      closing = true;
      unsubscribe();
      const stopped = Promise.all(servers.map((sv) => new Promise<void>((resolve) => sv.close(() => resolve()))));
      for (const conn of open) conn.shutdown('server shutting down');
      const deadline = Date.now() + (opts.drainMs ?? DEFAULTS.drainMs);
      while (open.size && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      for (const conn of open) conn.destroy();
      await stopped;
    },
  };
}

interface ServeDeps {
  backend: MailboxBackend;
  config: SessionConfig;
  autologoutMs: number;
  log: Logger;
  /** The certificate for STARTTLS, read at each upgrade; null when none is configured. */
  secureContext(): SecureContext | null;
}

/** Before login a literal never exceeds the ordinary literal limit, not even APPEND's. */
const PRE_AUTH_LIMITS = { appendLimit: MAX_LITERAL_BYTES, maxCommandLiteralBytes: MAX_LITERAL_BYTES };

function serve(raw: net.Socket, ip: string, secure: boolean, deps: ServeDeps): Connection {
  const { backend, config, log } = deps;
  // After STARTTLS, the TLS socket over `raw`; every read and write goes through this one.
  let socket: net.Socket = raw;
  let reader = new CommandReader(PRE_AUTH_LIMITS);
  let busy = false;
  let closed = false;
  let draining: string | null = null;
  let lineWaiter: ((line: Buffer | null) => void) | null = null;
  let timer: NodeJS.Timeout | null = null;

  // Responses written in one turn of the event loop leave in one write (a FETCH of many messages is
  // many small responses): the socket is corked at the first and uncorked once the turn is over.
  let corked = false;
  const flush = () => {
    if (!corked) return;
    corked = false;
    socket.uncork();
  };
  const write = (data: Buffer) => {
    if (closed || !socket.writable) return;
    if (!corked) {
      corked = true;
      socket.cork();
      setImmediate(flush);
    }
    socket.write(data);
  };
  // A command that sends much (FETCH 1:* BODY[]) waits here while the client has not read what it was
  // sent, rather than queueing the whole answer in memory.
  const writable = (): Promise<void> | null => {
    if (closed || !socket.writableNeedDrain || socket.writableLength < WRITE_BUFFER) return null;
    flush();
    return new Promise<void>((resolve) => {
      const done = () => {
        socket.off('drain', done);
        socket.off('close', done);
        resolve();
      };
      socket.once('drain', done);
      socket.once('close', done);
    });
  };

  // Flushed and written: nothing of what was sent is held by the socket any more. An empty write's
  // callback runs once every write before it is done (or failed with the connection), in order; 'drain'
  // would not come for less than the socket's high-water mark.
  const drained = (): Promise<void> | null => {
    flush();
    if (closed || !socket.writable || socket.writableLength === 0) return null;
    return new Promise<void>((resolve) => void socket.write(NO_BYTES, () => resolve()));
  };

  const session: Session = {
    state: 'not-authenticated',
    principal: null,
    selected: null,
    enabled: new Set(),
    secure,
    clientId: null,
    remoteAddress: ip,
    config,
    send: write,
    flush,
    writable,
    drained,
    readLine(signal) {
      return new Promise((resolve) => {
        if (closed || signal?.aborted) return resolve(null);
        const waiter = (line: Buffer | null) => {
          lineWaiter = null;
          signal?.removeEventListener('abort', onAbort);
          // The command goes on: no more input until it ends.
          if (!closed) socket.pause();
          resolve(line);
        };
        const onAbort = () => {
          if (lineWaiter === waiter) waiter(null);
        };
        signal?.addEventListener('abort', onAbort, { once: true });
        lineWaiter = waiter;
        reader.expectLine();
        socket.resume();
        deliverLine();
      });
    },
  };

  function end(reason: string | null) {
    if (closed) return;
    if (reason) write(statusResponse(null, 'BYE', reason));
    flush();
    closed = true;
    if (timer) clearTimeout(timer);
    socket.end();
    // A client that never reads its BYE does not keep the socket.
    setTimeout(() => socket.destroy(), 2000).unref();
    lineWaiter?.(null);
  }

  // RFC 3501 §5.4: the autologout timer restarts with every byte the client sends.
  function touch() {
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => end('autologout: idle for too long'), deps.autologoutMs);
    timer.unref();
  }

  function deliverLine() {
    if (!lineWaiter) return;
    const event = reader.next();
    if (!event) return;
    if (event.kind === 'line') lineWaiter(event.line);
    else if (event.kind === 'refused') lineWaiter(null);
  }

  function pump() {
    if (lineWaiter) return deliverLine();
    while (!busy && !closed) {
      const event = reader.next();
      if (!event) return;
      switch (event.kind) {
        case 'continue':
          write(continuation('go ahead'));
          break;
        case 'refused':
          write(refusalResponse(event));
          break;
        case 'line':
          break; // a line asked for by a command that has ended: nothing waits for it
        case 'command':
          void run(event.command);
          break;
      }
    }
  }

  async function run(command: RawCommand) {
    busy = true;
    socket.pause();
    let close = false;
    let startTls = false;
    try {
      ({ close, startTls } = await dispatch(session, backend, command, (err) =>
        log.error({ err, ip, user: session.principal?.username }, 'imap command failed'),
      ));
    } catch (err) {
      log.error({ err, ip }, 'imap session failed');
      close = true;
    }
    if (session.state === 'authenticated' || session.state === 'selected') {
      reader.setLimits({ appendLimit: config.appendLimit, maxCommandLiteralBytes: 10 * MAX_LITERAL_BYTES });
    }
    if (close || draining) return end(close ? null : draining);
    if (startTls) return upgrade();
    // A client that does not read its responses gets no more of them until it does.
    if (socket.writableNeedDrain) await new Promise((resolve) => socket.once('drain', resolve));
    busy = false;
    touch();
    if (closed) return;
    socket.resume();
    pump();
  }

  const onData = (chunk: Buffer) => {
    touch();
    reader.push(chunk);
    pump();
  };
  const onError = (err: Error) => log.debug({ err, ip }, 'imap connection error');
  const onClose = () => {
    closed = true;
    if (timer) clearTimeout(timer);
    lineWaiter?.(null);
  };

  /**
   * RFC 3501 §6.2.1: the handshake starts right after the tagged OK. Whatever the client sent after the
   * STARTTLS line arrived in the clear and is thrown away unread (RFC 2595 §3.1; the command injection of
   * CVE-2011-0411): only what comes through TLS is a command. The client asks for CAPABILITY again.
   */
  function upgrade() {
    const context = deps.secureContext();
    if (!context) return end('TLS is not available');
    // The tagged OK goes out in the clear before the handshake begins.
    flush();
    reader = new CommandReader(PRE_AUTH_LIMITS);
    raw.off('data', onData);
    const secured = new tls.TLSSocket(raw, { isServer: true, secureContext: context });
    socket = secured;
    socket.on('data', onData);
    socket.on('error', onError);
    socket.on('close', onClose);
    secured.once('secure', () => {
      session.secure = true;
      busy = false;
      touch();
      pump();
    });
  }

  socket.setNoDelay(true);
  socket.on('data', onData);
  socket.on('error', onError);
  socket.on('close', onClose);
  touch();
  // RFC 3501 §7.1.1: the greeting, with the capabilities (RFC 3501 §7.1 CAPABILITY response code).
  write(
    statusResponse(null, 'OK', 'svc-mail IMAP4rev1 ready', { code: 'CAPABILITY', capabilities: capabilities(session) }),
  );

  return {
    destroy: () => socket.destroy(),
    shutdown(reason) {
      // In IDLE or AUTHENTICATE the command waits on the client: it can be cut now. Otherwise after it ends.
      if (!busy || lineWaiter) end(reason);
      else draining = reason;
    },
  };
}
