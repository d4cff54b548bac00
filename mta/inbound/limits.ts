// The limits of an MX listener that faces the internet (docs/configuration.md, "Limits of the MX
// listener"): what one client, one session and one transaction may take of the listener. smtp-server
// enforces the message size (SIZE, RFC 1870), the connection count overall and the idle timeout from
// its options; the per-address count, the session deadline and the recipient cap are kept here.
import type { Readable } from 'node:stream';
import type { SMTPServer, SMTPServerOptions, SMTPServerSession } from 'smtp-server';
import type { Config } from '../../config/schema.js';
import { SmtpReply, toSmtpServerError } from '../../mail/smtp-reply.js';

/**
 * RFC 5321 §4.5.3.1.10: 452 when a transaction has too many recipients (the client sends the rest in
 * another one), never 552 (§4.5.3.1.8); RFC 3463 §3.6 X.5.3 (too many recipients).
 */
export const TOO_MANY_RECIPIENTS = new SmtpReply(452, '4.5.3', 'Too many recipients in this transaction');
/** RFC 5321 §3.8: 421 closes the channel; RFC 3463 §3.8 X.7.0 (other security or policy status). */
export const TOO_MANY_CONNECTIONS = new SmtpReply(421, '4.7.0', 'Too many connections from your address, try later');
/** RFC 5321 §3.8: 421 closes the channel; RFC 3463 §3.5 X.4.2 (bad connection): the session ran too long. */
export const SESSION_TOO_LONG = new SmtpReply(421, '4.4.2', 'Session time limit reached, closing connection');

export type MxLimits = Pick<
  Config,
  | 'maxMessageBytes'
  | 'mxMaxConnections'
  | 'mxMaxConnectionsPerIp'
  | 'mxMaxRecipients'
  | 'mxIdleTimeoutMs'
  | 'mxSessionTimeoutMs'
>;

/** The smtp-server options that carry the limits it enforces itself. */
export function limitOptions(l: MxLimits): Pick<SMTPServerOptions, 'size' | 'maxClients' | 'socketTimeout'> {
  return {
    // Advertised in EHLO as "SIZE n" and checked against MAIL FROM's SIZE= (RFC 1870 §4); a message
    // sent without SIZE= is counted as it streams (`stream.sizeExceeded`) and refused by onData.
    size: l.maxMessageBytes,
    // The connection after the last is answered "421 … Too many connected clients" and closed.
    maxClients: l.mxMaxConnections,
    // Idle timeout: reset by every byte, which is why the session deadline below exists too.
    socketTimeout: l.mxIdleTimeoutMs,
  };
}

// The key a client is counted under lives with the other client-address rules (the HTTP throttles use it too).
export { clientKey } from '../../mail/client-address.js';
import { clientKey } from '../../mail/client-address.js';

export interface ConnectionGuard {
  /** For smtpHooks: admits the session or throws TOO_MANY_CONNECTIONS; starts its deadline. */
  onConnect(session: SMTPServerSession): Promise<void>;
  /** smtp-server's onClose: forgets the session. Called for every closed connection, admitted or not. */
  onClose(session: SMTPServerSession): void;
}

/** How often a session past its deadline looks again while the listener owes its client a reply. */
const OWED_REPLY_RECHECK_MS = 1000;

/**
 * Counts admitted sessions per client key and closes each at its deadline. `server` is a getter: the
 * guard's hooks go into the options of the server it watches.
 */
export function connectionGuard(l: MxLimits, server: () => SMTPServer): ConnectionGuard {
  const perKey = new Map<string, number>();
  const admitted = new Map<string, { key: string; deadline: NodeJS.Timeout }>();

  const expire = (id: string) => {
    const conn = [...server().connections].find((c) => c.id === id);
    if (!conn) return;
    // A client waiting for our answer to its message is not the slow client this deadline is for:
    // closing now could lose a message we are about to accept, or make it come twice. The same test
    // as smtp-server's own idle timeout (it counts only while the client owes us input).
    const owed = conn._handlerPending || (conn._dataStream && conn._parser && !conn._parser._dataMode);
    const entry = admitted.get(id);
    if (owed && entry) {
      entry.deadline = setTimeout(() => expire(id), OWED_REPLY_RECHECK_MS).unref();
      return;
    }
    // RFC 5321 §3.8: the server may close with 421 at any time; 421 makes smtp-server close after writing.
    conn.send(SESSION_TOO_LONG.code, `${SESSION_TOO_LONG.enhanced} ${SESSION_TOO_LONG.text}`, false);
  };

  return {
    async onConnect(session) {
      const key = clientKey(session.remoteAddress);
      const n = perKey.get(key) ?? 0;
      if (n >= l.mxMaxConnectionsPerIp) throw TOO_MANY_CONNECTIONS;
      perKey.set(key, n + 1);
      admitted.set(session.id, { key, deadline: setTimeout(() => expire(session.id), l.mxSessionTimeoutMs).unref() });
    },
    onClose(session) {
      const entry = admitted.get(session.id);
      if (!entry) return;
      admitted.delete(session.id);
      clearTimeout(entry.deadline);
      const n = (perKey.get(entry.key) ?? 1) - 1;
      if (n > 0) perKey.set(entry.key, n);
      else perKey.delete(entry.key);
    },
  };
}

type RcptHook = NonNullable<SMTPServerOptions['onRcptTo']>;

/**
 * Wraps an onRcptTo handler so that a transaction holds at most `max` recipients: one more is answered
 * 452 4.5.3 before the recipient policy runs. A repeated recipient replaces its entry (smtp-server), so
 * it is let through. smtp-server's own maxRecipients would answer without the enhanced code.
 */
export function capRecipients(max: number, inner: RcptHook): RcptHook {
  return (address, session, callback) => {
    const rcpts = session.envelope.rcptTo;
    if (rcpts.length >= max) {
      const again = address.address.toLowerCase();
      if (!rcpts.some((r) => r.address.toLowerCase() === again))
        return callback(toSmtpServerError(TOO_MANY_RECIPIENTS));
    }
    inner(address, session, callback);
  };
}

/**
 * The whole of a DATA stream if it is at most `max` bytes and within SIZE, else null. Past `max` the
 * rest is read and dropped rather than buffered, so that the refusal comes after the client's final
 * dot (RFC 5321 §4.1.1.4: the reply to DATA follows the end of the data).
 */
export async function readCapped(stream: Readable & { sizeExceeded?: boolean }, max: number): Promise<Buffer | null> {
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of stream) {
    total += (chunk as Buffer).length;
    if (total <= max) chunks.push(chunk as Buffer);
    else chunks.length = 0;
  }
  return total > max || stream.sizeExceeded ? null : Buffer.concat(chunks, total);
}
