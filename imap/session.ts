// A session as the command handlers see it: its state (RFC 3501 §3), who logged in, what is selected,
// which extensions the client enabled, and a way to send untagged responses. The socket, TLS and timers
// live in the server; the handlers get only this.
import type { MailboxSnapshot, Principal } from './backend.js';

/** RFC 3501 §3: the four states; a command names the ones it is valid in. */
export type SessionState = 'not-authenticated' | 'authenticated' | 'selected' | 'logout';

export interface SessionConfig {
  /** RFC 7889 §2: the APPENDLIMIT we advertise and the reader enforces. */
  appendLimit: number;
  /** A certificate is configured, so STARTTLS can be offered. */
  tlsAvailable: boolean;
  /**
   * RFC 3501 §6.2.3 / §11.1: a server should not accept a password in the clear; without TLS LOGIN is
   * refused and LOGINDISABLED advertised, unless this is set (loopback tests, a TLS-terminating proxy).
   */
  allowPlaintextAuth: boolean;
  /** RFC 2971 §3.3 server ID: name and version. */
  serverName: string;
  serverVersion: string;
}

export interface SelectedMailbox {
  snapshot: MailboxSnapshot;
  /** EXAMINE, or a mailbox the user may not change (RFC 3501 §6.3.2). */
  readOnly: boolean;
}

export interface Session {
  state: SessionState;
  principal: Principal | null;
  selected: SelectedMailbox | null;
  /** RFC 5161: the extensions ENABLEd in this session (only CONDSTORE is enable-able here). */
  enabled: Set<string>;
  /** TLS is in force (implicit TLS or after STARTTLS). */
  secure: boolean;
  /** RFC 2971: what the client said about itself, for logs. */
  clientId: Array<[string, string | null]> | null;
  readonly remoteAddress: string;
  readonly config: SessionConfig;
  /** Writes bytes (untagged responses, continuations) to the client, in order. */
  send(data: Buffer): void;
}
