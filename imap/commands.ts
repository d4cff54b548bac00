// The command table (docs/conventions.md #2): every command as data — the states it is valid in
// (RFC 3501 §3, §6), the capability that must be advertised for it, and its handler over a Session and
// the MailboxBackend. One dispatcher parses, checks state and capability, runs the handler and writes the
// one tagged response; a parse error is a tagged BAD and the session goes on (RFC 3501 §7.1.3).
//
// Handlers that need no storage are written here; login, the mailbox-level commands and IDLE in
// imap/handlers/mailboxes.ts; FETCH, SEARCH, STORE, COPY, MOVE and their UID forms in
// imap/handlers/messages.ts; STARTTLS's handshake in imap/server.ts. The table is exhaustive
// over the Command union, so a command the parser knows cannot be missing from it.
import { BackendError, type BackendErrorCode, type MailboxBackend } from './backend.js';
import { CommandError, parseCommand } from './parser.js';
import { atom, statusResponse, untagged, type ImapValue, type ResponseCode } from './response.js';
import type { CommandName, CommandOf } from './command-types.js';
import type { RawCommand, ReaderEvent } from './reader.js';
import { syncSelected, type Session, type SessionState } from './session.js';
import * as mb from './handlers/mailboxes.js';
import * as messages from './handlers/messages.js';

export interface Outcome {
  status: 'OK' | 'NO' | 'BAD';
  text: string;
  code?: ResponseCode;
  /** The connection closes after the tagged response (LOGOUT, RFC 3501 §6.1.3). */
  close?: boolean;
  /** The TLS handshake starts after the tagged response (STARTTLS, RFC 3501 §6.2.1). */
  startTls?: boolean;
}

export type Handler<N extends CommandName> = (
  session: Session,
  command: CommandOf<N>,
  backend: MailboxBackend,
) => Promise<Outcome>;

export interface CommandSpec<N extends CommandName> {
  states: readonly SessionState[];
  /** Advertised capability the command belongs to; null for IMAP4rev1's own. */
  capability: string | null;
  handler: Handler<N>;
}

const ANY: readonly SessionState[] = ['not-authenticated', 'authenticated', 'selected'];
const NOT_AUTH: readonly SessionState[] = ['not-authenticated'];
const AUTH: readonly SessionState[] = ['authenticated', 'selected'];
const SELECTED: readonly SessionState[] = ['selected'];

/** Capabilities that are not commands: advertised once authenticated (RFC 3501 §7.2.1 lets the list change). */
function extensionCapabilities(session: Session): string[] {
  return [
    'UIDPLUS', // RFC 4315
    'QUOTA', // RFC 9208 §3.1
    'QUOTA=RES-STORAGE', // RFC 9208 §5.1
    'SPECIAL-USE', // RFC 6154 §5
    'CONDSTORE', // RFC 7162 §3
    `APPENDLIMIT=${session.config.appendLimit}`, // RFC 7889 §2
  ];
}

/**
 * RFC 3501 §7.2.1: IMAP4rev1 first. Before login: STARTTLS while TLS is offered and not yet in force,
 * and LOGINDISABLED instead of AUTH=PLAIN where a password would travel in the clear (§6.2.3).
 */
export function capabilities(session: Session): string[] {
  const caps = ['IMAP4rev1', 'LITERAL+', 'ID', 'ENABLE', 'IDLE', 'NAMESPACE', 'UNSELECT', 'MOVE'];
  if (session.state === 'not-authenticated') {
    if (session.config.tlsAvailable && !session.secure) caps.push('STARTTLS');
    if (session.secure || session.config.allowPlaintextAuth) caps.push('AUTH=PLAIN', 'SASL-IR');
    else caps.push('LOGINDISABLED');
    return caps;
  }
  return [...caps, ...extensionCapabilities(session)];
}

/** RFC 5161 §3.1: the extensions a client may ENABLE. QRESYNC and UTF8=ACCEPT are not offered. */
const ENABLEABLE = ['CONDSTORE'];

const capability: Handler<'CAPABILITY'> = async (session) => {
  session.send(untagged([atom('CAPABILITY'), ...capabilities(session).map(atom)]));
  return { status: 'OK', text: 'CAPABILITY completed' };
};

const noop: Handler<'NOOP'> = async () => ({ status: 'OK', text: 'NOOP completed' });

/**
 * RFC 3501 §6.2.1: only offered while TLS is available and not yet in force (the capability check refuses
 * it otherwise); the server starts the handshake once this OK is written.
 */
const startTls: Handler<'STARTTLS'> = async () => ({ status: 'OK', text: 'Begin TLS negotiation now', startTls: true });

const logout: Handler<'LOGOUT'> = async (session) => {
  // RFC 3501 §6.1.3: an untagged BYE before the tagged OK.
  session.send(statusResponse(null, 'BYE', 'logging out'));
  session.state = 'logout';
  return { status: 'OK', text: 'LOGOUT completed', close: true };
};

const id: Handler<'ID'> = async (session, command) => {
  session.clientId = command.params;
  // RFC 2971 §3.2: the server answers with its own parameters (or NIL).
  const ours: ImapValue[] = ['name', session.config.serverName, 'version', session.config.serverVersion];
  session.send(untagged([atom('ID'), ours]));
  return { status: 'OK', text: 'ID completed' };
};

const enable: Handler<'ENABLE'> = async (session, command) => {
  // RFC 5161 §3.1: unknown or non-enableable names are ignored; ENABLED lists what this command newly
  // enabled, and may be empty.
  const now = command.capabilities.filter((c) => ENABLEABLE.includes(c) && !session.enabled.has(c));
  for (const c of now) session.enabled.add(c);
  session.send(untagged([atom('ENABLED'), ...now.map(atom)]));
  return { status: 'OK', text: 'ENABLE completed' };
};

const namespace: Handler<'NAMESPACE'> = async (session) => {
  // RFC 2342 §5: one personal namespace with prefix "" and delimiter "/"; no other users', no shared.
  session.send(untagged([atom('NAMESPACE'), [['', '/']], null, null]));
  return { status: 'OK', text: 'NAMESPACE completed' };
};

export const COMMANDS: { readonly [N in CommandName]: CommandSpec<N> } = {
  // RFC 3501 §6.1: any state.
  CAPABILITY: { states: ANY, capability: null, handler: capability },
  NOOP: { states: ANY, capability: null, handler: noop },
  LOGOUT: { states: ANY, capability: null, handler: logout },
  ID: { states: ANY, capability: 'ID', handler: id }, // RFC 2971 §3.1
  // RFC 3501 §6.2: not authenticated.
  STARTTLS: { states: NOT_AUTH, capability: 'STARTTLS', handler: startTls },
  AUTHENTICATE: { states: NOT_AUTH, capability: null, handler: mb.authenticate },
  LOGIN: { states: NOT_AUTH, capability: null, handler: mb.login },
  // RFC 3501 §6.3: authenticated (and so selected).
  SELECT: { states: AUTH, capability: null, handler: mb.select },
  EXAMINE: { states: AUTH, capability: null, handler: mb.examine },
  CREATE: { states: AUTH, capability: null, handler: mb.create },
  DELETE: { states: AUTH, capability: null, handler: mb.del },
  RENAME: { states: AUTH, capability: null, handler: mb.rename },
  SUBSCRIBE: { states: AUTH, capability: null, handler: mb.subscribe },
  UNSUBSCRIBE: { states: AUTH, capability: null, handler: mb.subscribe },
  LIST: { states: AUTH, capability: null, handler: mb.list },
  LSUB: { states: AUTH, capability: null, handler: mb.lsub },
  STATUS: { states: AUTH, capability: null, handler: mb.status },
  APPEND: { states: AUTH, capability: null, handler: mb.append },
  NAMESPACE: { states: AUTH, capability: 'NAMESPACE', handler: namespace }, // RFC 2342 §5
  IDLE: { states: AUTH, capability: 'IDLE', handler: mb.idle }, // RFC 2177 §3
  GETQUOTA: { states: AUTH, capability: 'QUOTA', handler: mb.getQuota }, // RFC 9208 §4.2
  GETQUOTAROOT: { states: AUTH, capability: 'QUOTA', handler: mb.getQuotaRoot }, // RFC 9208 §4.3
  // RFC 5161 §3.1: "only valid in the authenticated state, before any mailbox is selected".
  ENABLE: { states: ['authenticated'], capability: 'ENABLE', handler: enable },
  // RFC 3501 §6.4: selected.
  CHECK: { states: SELECTED, capability: null, handler: mb.check },
  CLOSE: { states: SELECTED, capability: null, handler: mb.close },
  UNSELECT: { states: SELECTED, capability: 'UNSELECT', handler: mb.unselect }, // RFC 3691 §2
  EXPUNGE: { states: SELECTED, capability: null, handler: mb.expunge },
  SEARCH: { states: SELECTED, capability: null, handler: messages.searchMessages },
  FETCH: { states: SELECTED, capability: null, handler: messages.fetchMessages },
  STORE: { states: SELECTED, capability: null, handler: messages.storeMessages },
  COPY: { states: SELECTED, capability: null, handler: messages.copyMessages },
  MOVE: { states: SELECTED, capability: 'MOVE', handler: messages.moveMessages }, // RFC 6851 §3
  'UID SEARCH': { states: SELECTED, capability: null, handler: messages.uidSearchMessages },
  'UID FETCH': { states: SELECTED, capability: null, handler: messages.uidFetchMessages },
  'UID STORE': { states: SELECTED, capability: null, handler: messages.uidStoreMessages },
  'UID COPY': { states: SELECTED, capability: null, handler: messages.uidCopyMessages },
  'UID MOVE': { states: SELECTED, capability: 'MOVE', handler: messages.uidMoveMessages },
  'UID EXPUNGE': { states: SELECTED, capability: 'UIDPLUS', handler: mb.expunge }, // RFC 4315 §2.1
};

/** One backend error code, one response code (RFC 5530 §3, RFC 9208 §4.3, RFC 7889 §2). */
const BACKEND_CODES: Record<BackendErrorCode, ResponseCode> = {
  nonexistent: { code: 'NONEXISTENT' },
  'already-exists': { code: 'ALREADYEXISTS' },
  'over-quota': { code: 'OVERQUOTA' },
  'too-big': { code: 'TOOBIG' },
  'no-permission': { code: 'NOPERM' },
  'in-use': { code: 'INUSE' },
  'has-children': { code: 'HASCHILDREN' },
  cannot: { code: 'CANNOT' },
  unavailable: { code: 'UNAVAILABLE' },
};

/** RFC 3501 §6.3.11, §6.4.7: a missing target of APPEND or COPY is [TRYCREATE], so the client may create it. */
const TRYCREATE: readonly CommandName[] = ['APPEND', 'COPY', 'UID COPY', 'MOVE', 'UID MOVE'];

export function backendOutcome(name: CommandName, err: BackendError): Outcome {
  const code = err.code === 'nonexistent' && TRYCREATE.includes(name) ? { code: 'TRYCREATE' as const } : undefined;
  return { status: 'NO', code: code ?? BACKEND_CODES[err.code], text: err.message };
}

export interface DispatchResult {
  close: boolean;
  startTls: boolean;
}

/**
 * Runs one command: parse, state and capability checks, handler, and the tagged response. Nothing a
 * handler throws escapes: a BackendError becomes its NO, anything else `NO [SERVERBUG]` (RFC 5530 §3),
 * reported through `onError` for the log, and the session goes on.
 */
export async function dispatch(
  session: Session,
  backend: MailboxBackend,
  raw: RawCommand,
  onError: (err: unknown) => void = () => {},
): Promise<DispatchResult> {
  let parsed;
  try {
    parsed = parseCommand(raw);
  } catch (err) {
    if (!(err instanceof CommandError)) throw err;
    const { status, code, message } = err.error;
    session.send(statusResponse(err.tag, status, message, code));
    return { close: false, startTls: false };
  }
  const { tag, command } = parsed;
  const spec = COMMANDS[command.name] as CommandSpec<CommandName>;
  // A logged-in session holds only while its inbox does: deleted, or its password changed, it ends.
  if (session.principal && !(await stillValid(session, backend, onError))) {
    session.send(statusResponse(null, 'BYE', 'the inbox is no longer available with these credentials'));
    session.state = 'logout';
    return { close: true, startTls: false };
  }
  let outcome: Outcome;
  if (!spec.states.includes(session.state)) {
    outcome = { status: 'BAD', text: `${command.name} is not valid in the ${session.state} state` };
  } else if (spec.capability && !capabilities(session).includes(spec.capability)) {
    outcome = { status: 'BAD', text: `${command.name} needs ${spec.capability}, which is not offered now` };
  } else {
    try {
      outcome = await spec.handler(session, command as never, backend);
    } catch (err) {
      if (err instanceof BackendError) outcome = backendOutcome(command.name, err);
      else {
        onError(err);
        outcome = { status: 'NO', code: { code: 'SERVERBUG' }, text: 'internal error' };
      }
    }
  }
  let close = outcome.close === true;
  if (session.state === 'selected' && !close && command.name !== 'IDLE') {
    // RFC 3501 §7: what others changed is told before the tagged response; EXPUNGE never during FETCH,
    // STORE or SEARCH (§7.4.1), whose sequence numbers must hold until they complete.
    try {
      await syncSelected(session, backend, { expunges: !NO_EXPUNGE_DURING.includes(command.name) });
    } catch (err) {
      if (err instanceof BackendError && err.code === 'nonexistent') {
        session.send(statusResponse(null, 'BYE', 'the selected mailbox was deleted'));
        close = true;
      } else onError(err);
    }
  }
  session.send(statusResponse(tag, outcome.status, outcome.text, outcome.code));
  return { close, startTls: outcome.startTls === true && !close };
}

/** RFC 3501 §7.4.1: no EXPUNGE response while these run (their UID forms may, but need not, have them). */
const NO_EXPUNGE_DURING: readonly CommandName[] = ['FETCH', 'STORE', 'SEARCH'];

async function stillValid(session: Session, backend: MailboxBackend, onError: (err: unknown) => void) {
  try {
    return await backend.checkPrincipal(session.principal as NonNullable<Session['principal']>);
  } catch (err) {
    // The store is down: the command itself will fail and say so; the session is not ended for it.
    onError(err);
    return true;
  }
}

/**
 * The answer to a command the reader refused unread. APPEND over the APPENDLIMIT is `NO [TOOBIG]`
 * (RFC 7889 §2, the code from RFC 4469 §5); any other over-limit literal or line is `BAD`, with
 * [TOOBIG] on literals as RFC 7888 §4 suggests. A refused line with no readable tag is answered `* BAD`.
 */
export function refusalResponse(event: Extract<ReaderEvent, { kind: 'refused' }>): Buffer {
  if (event.reason === 'line-too-long') {
    return statusResponse(event.tag, 'BAD', `command line longer than ${event.limit} octets`);
  }
  if (event.reason === 'too-many-literals') {
    return statusResponse(event.tag, 'BAD', `more than ${event.limit} literals in one command`, { code: 'LIMIT' });
  }
  const append = event.name === 'APPEND';
  return statusResponse(event.tag, append ? 'NO' : 'BAD', `literal larger than ${event.limit} octets`, {
    code: 'TOOBIG',
  });
}
