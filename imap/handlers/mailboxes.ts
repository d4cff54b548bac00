// The handlers of login, the mailbox-level commands and IDLE (RFC 3501 §6.2-§6.4, RFC 2177, RFC 4315,
// RFC 6154, RFC 9208, RFC 7162): everything a client does to mailboxes as wholes. The message-level
// commands (FETCH, SEARCH, STORE, COPY, MOVE) live beside this module; both work on the session's
// selected-mailbox map through the functions of imap/session.ts.
import { BackendError, type MailboxInfo, type Principal } from '../backend.js';
import { capabilities, type Handler, type Outcome } from '../commands.js';
import type { StatusItem } from '../command-types.js';
import { encodeMutf7 } from '../mutf7.js';
import { atom, untagged, type ImapValue } from '../response.js';
import { resolveUids } from '../sequence-set.js';
import { announceExpunged, newSelected, seqOf, syncSelected, type Session } from '../session.js';

const DELIMITER = '/';
const ok = (text: string, extra: Partial<Outcome> = {}): Outcome => ({ status: 'OK', text, ...extra });

/** A mailbox name as it goes on the wire: modified UTF-7 (RFC 3501 §5.1.3), quoted or a literal. */
const wireName = (name: string): string => encodeMutf7(name);

// ---- login: RFC 3501 §6.2.2, §6.2.3; RFC 4616; RFC 4959 ----

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function logIn(session: Session, backend: Parameters<Handler<'LOGIN'>>[2], user: string, pass: string) {
  if (!session.secure && !session.config.allowPlaintextAuth) {
    // RFC 3501 §6.2.3 with LOGINDISABLED advertised; RFC 5530 §3 PRIVACYREQUIRED.
    return { status: 'NO', code: { code: 'PRIVACYREQUIRED' }, text: 'use TLS to log in' } satisfies Outcome;
  }
  const started = Date.now();
  // Every failure (and a throttled try) is answered at the same moment after it began.
  const settle = () => sleep(Math.max(0, started + session.config.loginFailureDelayMs - Date.now()));
  let principal: Principal | null;
  try {
    principal = await backend.authenticate(user, pass, { remoteAddress: session.remoteAddress });
  } catch (err) {
    await settle();
    throw err;
  }
  if (!principal) {
    await settle();
    return { status: 'NO', code: { code: 'AUTHENTICATIONFAILED' }, text: 'invalid credentials' } satisfies Outcome;
  }
  session.principal = principal;
  session.state = 'authenticated';
  // RFC 3501 §7.1 CAPABILITY code: the list after login comes with the OK, saving the client a round trip.
  return ok('logged in', { code: { code: 'CAPABILITY', capabilities: capabilities(session) } });
}

export const login: Handler<'LOGIN'> = (session, command, backend) =>
  logIn(session, backend, command.username, command.password);

export const authenticate: Handler<'AUTHENTICATE'> = async (session, command, backend) => {
  // RFC 3501 §6.2.2: an unknown mechanism is NO.
  if (command.mechanism !== 'PLAIN') return { status: 'NO', code: { code: 'CANNOT' }, text: 'unsupported mechanism' };
  if (!session.secure && !session.config.allowPlaintextAuth) {
    return { status: 'NO', code: { code: 'PRIVACYREQUIRED' }, text: 'use TLS to log in' };
  }
  let response = command.initialResponse;
  if (response === null) {
    // RFC 4616 §2: PLAIN has no challenge, so the continuation carries an empty one.
    session.send(Buffer.from('+ \r\n'));
    const line = await session.readLine();
    if (line === null) return { status: 'BAD', text: 'no response', close: true };
    response = line.toString('latin1').trim();
    // RFC 3501 §6.2.2: "*" cancels the exchange, answered BAD.
    if (response === '*') return { status: 'BAD', text: 'AUTHENTICATE cancelled' };
    if (response !== '' && response !== '=' && !/^[A-Za-z0-9+/]+={0,2}$/.test(response)) {
      return { status: 'BAD', text: 'the response is not base64' };
    }
  }
  // RFC 4616 §2: message = [authzid] NUL authcid NUL passwd, UTF-8.
  const parts = Buffer.from(response === '=' ? '' : response, 'base64')
    .toString('utf8')
    .split('\0');
  if (parts.length !== 3) {
    return { status: 'NO', code: { code: 'AUTHENTICATIONFAILED' }, text: 'malformed PLAIN response' };
  }
  const [authzid, authcid, password] = parts as [string, string, string];
  // RFC 4616 §2: we act as nobody but the one who logged in.
  if (authzid !== '' && authzid.toLowerCase() !== authcid.toLowerCase()) {
    return { status: 'NO', code: { code: 'AUTHORIZATIONFAILED' }, text: 'cannot act as another user' };
  }
  return logIn(session, backend, authcid, password);
};

// ---- SELECT, EXAMINE, CLOSE, UNSELECT: RFC 3501 §6.3.1, §6.3.2, §6.4.2; RFC 3691; RFC 7162 §3.1.2 ----

const SYSTEM_FLAGS = ['\\Answered', '\\Flagged', '\\Deleted', '\\Seen', '\\Draft'];

function selectHandler(readOnly: boolean): Handler<'SELECT' | 'EXAMINE'> {
  return async (session, command, backend) => {
    const user = session.principal as Principal;
    const wasSelected = session.selected !== null;
    // RFC 3501 §6.3.1: a failed SELECT leaves no mailbox selected.
    session.selected = null;
    session.state = 'authenticated';
    // RFC 7162 §3.2.11 (and RFC 9051 §7.1): the previous mailbox is closed.
    if (wasSelected) session.send(untagged([atom('OK'), atom('[CLOSED]'), atom('previous mailbox closed')]));
    if (command.condstore) session.enabled.add('CONDSTORE'); // RFC 7162 §3.1: a CONDSTORE-enabling command
    const snap = await backend.select(user, command.mailbox, { readOnly });
    const flags = [...SYSTEM_FLAGS, ...snap.keywords];
    session.send(untagged([atom('FLAGS'), flags.map(atom)]));
    session.send(untagged([snap.uids.length, atom('EXISTS')]));
    session.send(untagged([snap.recent, atom('RECENT')]));
    const sel = newSelected(snap, readOnly || snap.readOnly);
    const firstUnseen = snap.firstUnseenUid === null ? 0 : seqOf(sel, snap.firstUnseenUid);
    if (firstUnseen) session.send(statusLine('UNSEEN', firstUnseen, `message ${firstUnseen} is first unseen`));
    const permanent = sel.readOnly ? [] : [...flags, '\\*'];
    session.send(untagged([atom('OK'), atom(`[PERMANENTFLAGS (${permanent.join(' ')})]`), atom('flags')]));
    session.send(statusLine('UIDVALIDITY', snap.uidValidity, 'UIDs valid'));
    session.send(statusLine('UIDNEXT', snap.uidNext, 'predicted next UID'));
    session.send(statusLine('HIGHESTMODSEQ', snap.highestModseq, 'highest'));
    session.selected = sel;
    session.state = 'selected';
    const code = sel.readOnly ? 'READ-ONLY' : 'READ-WRITE';
    return ok(`${readOnly ? 'EXAMINE' : 'SELECT'} completed`, { code: { code } });
  };
}

function statusLine(code: string, value: number | bigint, text: string): Buffer {
  return untagged([atom('OK'), atom(`[${code} ${value}]`), atom(text)]);
}

export const select = selectHandler(false);
export const examine = selectHandler(true);

function deselect(session: Session): void {
  session.selected = null;
  session.state = 'authenticated';
}

export const close: Handler<'CLOSE'> = async (session, _command, backend) => {
  const sel = session.selected;
  // RFC 3501 §6.4.2: messages marked \Deleted are removed, silently (no EXPUNGE responses), unless read-only.
  if (sel && !sel.readOnly) await backend.expunge(session.principal as Principal, sel.snapshot.mailboxId, null);
  deselect(session);
  return ok('CLOSE completed');
};

export const unselect: Handler<'UNSELECT'> = async (session) => {
  deselect(session);
  return ok('UNSELECT completed');
};

// RFC 3501 §6.4.1: CHECK is a checkpoint; our writes are durable when they answer. The sync runs after it.
export const check: Handler<'CHECK'> = async () => ok('CHECK completed');

// ---- EXPUNGE, UID EXPUNGE: RFC 3501 §6.4.3, RFC 4315 §2.1 ----

export const expunge: Handler<'EXPUNGE' | 'UID EXPUNGE'> = async (session, command, backend) => {
  const sel = session.selected;
  if (!sel) return { status: 'BAD', text: 'no mailbox selected' };
  if (sel.readOnly) return { status: 'NO', code: { code: 'READ-ONLY' }, text: 'the mailbox is read-only' };
  const uids = command.name === 'UID EXPUNGE' ? resolveUids(command.set, sel.uids) : null;
  if (uids && !uids.length) return ok('UID EXPUNGE completed');
  const gone = await backend.expunge(session.principal as Principal, sel.snapshot.mailboxId, uids);
  announceExpunged(session, gone);
  return ok(`${command.name} completed`);
};

// ---- CREATE, DELETE, RENAME, SUBSCRIBE, UNSUBSCRIBE: RFC 3501 §6.3.3-§6.3.7 ----

export const create: Handler<'CREATE'> = async (session, command, backend) => {
  await backend.createMailbox(session.principal as Principal, command.mailbox);
  return ok('CREATE completed');
};

export const del: Handler<'DELETE'> = async (session, command, backend) => {
  const user = session.principal as Principal;
  await backend.deleteMailbox(user, command.mailbox);
  return ok('DELETE completed');
};

export const rename: Handler<'RENAME'> = async (session, command, backend) => {
  await backend.renameMailbox(session.principal as Principal, command.from, command.to);
  return ok('RENAME completed');
};

export const subscribe: Handler<'SUBSCRIBE' | 'UNSUBSCRIBE'> = async (session, command, backend) => {
  await backend.setSubscribed(session.principal as Principal, command.mailbox, command.name === 'SUBSCRIBE');
  return ok(`${command.name} completed`);
};

// ---- LIST, LSUB: RFC 3501 §6.3.8, §6.3.9; RFC 6154 §2, §5; RFC 5258 selection and return options ----

/** RFC 3501 §6.3.8: "*" matches anything, "%" anything but the delimiter; INBOX matches in any case. */
export function listMatcher(reference: string, pattern: string): (name: string) => boolean {
  let full = reference + pattern;
  const head = full.slice(0, 5);
  if (head.toUpperCase() === 'INBOX' && (full.length === 5 || full[5] === DELIMITER || /[*%]/.test(full[5] ?? ''))) {
    full = 'INBOX' + full.slice(5);
  }
  const source = [...full]
    .map((ch) => (ch === '*' ? '.*' : ch === '%' ? '[^/]*' : ch.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  const re = new RegExp(`^${source}$`, 's');
  return (name) => re.test(name);
}

function listAttributes(info: MailboxInfo, withSubscribed: boolean): ImapValue[] {
  const attrs: string[] = [];
  if (!info.selectable) attrs.push('\\Noselect');
  // RFC 3348 / RFC 5258 §4: children are told, so a client need not LIST again to draw the tree.
  attrs.push(info.hasChildren ? '\\HasChildren' : '\\HasNoChildren');
  if (info.specialUse) attrs.push(info.specialUse); // RFC 6154 §2: in every LIST response
  if (withSubscribed && info.subscribed) attrs.push('\\Subscribed');
  return attrs.map(atom);
}

export const list: Handler<'LIST'> = async (session, command, backend) => {
  const { reference, patterns, options } = command;
  // RFC 3501 §6.3.8: an empty pattern asks for the delimiter and the root.
  if (patterns.length === 1 && patterns[0] === '') {
    session.send(untagged([atom('LIST'), [atom('\\Noselect')], DELIMITER, '']));
    return ok('LIST completed');
  }
  const user = session.principal as Principal;
  const infos = await backend.listMailboxes(user);
  const matchers = patterns.map((p) => listMatcher(reference, p));
  const subscribedOnly = options.selection.includes('SUBSCRIBED');
  const specialOnly = options.selection.includes('SPECIAL-USE');
  const withSubscribed = subscribedOnly || options.return.includes('SUBSCRIBED');
  for (const info of infos) {
    if (!matchers.some((m) => m(info.name))) continue;
    if (subscribedOnly && !info.subscribed) continue;
    if (specialOnly && !info.specialUse) continue;
    session.send(untagged([atom('LIST'), listAttributes(info, withSubscribed), DELIMITER, wireName(info.name)]));
    // RFC 5819 §2: LIST-STATUS; a mailbox that cannot be selected has no STATUS.
    if (options.status && info.selectable) await sendStatus(session, backend, info.name, options.status);
  }
  return ok('LIST completed');
};

export const lsub: Handler<'LSUB'> = async (session, command, backend) => {
  const infos = await backend.listMailboxes(session.principal as Principal);
  const match = listMatcher(command.reference, command.pattern);
  for (const info of infos) {
    if (!info.subscribed || !match(info.name)) continue;
    const attrs = info.selectable ? [] : [atom('\\Noselect')];
    session.send(untagged([atom('LSUB'), attrs, DELIMITER, wireName(info.name)]));
  }
  return ok('LSUB completed');
};

// ---- STATUS: RFC 3501 §6.3.10, RFC 7162 §3.1.6, RFC 7889 §2 ----

async function sendStatus(
  session: Session,
  backend: Parameters<Handler<'STATUS'>>[2],
  name: string,
  items: readonly StatusItem[],
) {
  const st = await backend.status(session.principal as Principal, name);
  const values: ImapValue[] = [];
  for (const item of items) {
    const value: Record<StatusItem, number | bigint> = {
      MESSAGES: st.messages,
      RECENT: st.recent,
      UIDNEXT: st.uidNext,
      UIDVALIDITY: st.uidValidity,
      UNSEEN: st.unseen,
      HIGHESTMODSEQ: st.highestModseq,
      APPENDLIMIT: session.config.appendLimit,
    };
    values.push(atom(item), value[item]);
  }
  session.send(untagged([atom('STATUS'), wireName(name), values]));
}

export const status: Handler<'STATUS'> = async (session, command, backend) => {
  // RFC 7162 §3.1: STATUS (HIGHESTMODSEQ) enables CONDSTORE.
  if (command.items.includes('HIGHESTMODSEQ')) session.enabled.add('CONDSTORE');
  await sendStatus(session, backend, command.mailbox, command.items);
  return ok('STATUS completed');
};

// ---- APPEND: RFC 3501 §6.3.11, RFC 4315 §3 APPENDUID, RFC 9208 §4.3 OVERQUOTA ----

export const append: Handler<'APPEND'> = async (session, command, backend) => {
  const user = session.principal as Principal;
  if (command.message.length > session.config.appendLimit) {
    return { status: 'NO', code: { code: 'TOOBIG' }, text: 'message larger than APPENDLIMIT' };
  }
  const out = await backend.append(user, command.mailbox, {
    bytes: command.message,
    flags: command.flags,
    internalDate: command.date,
  });
  return ok('APPEND completed', { code: { code: 'APPENDUID', uidValidity: out.uidValidity, uids: [out.uid] } });
};

// ---- GETQUOTA, GETQUOTAROOT: RFC 9208 §4.2, §4.3 ----

function quotaResponse(root: { name: string; resources: Array<{ name: string; usage: number; limit: number }> }) {
  const res: ImapValue[] = root.resources.flatMap((r) => [atom(r.name), r.usage, r.limit]);
  return untagged([atom('QUOTA'), root.name, res]);
}

export const getQuota: Handler<'GETQUOTA'> = async (session, command, backend) => {
  session.send(quotaResponse(await backend.quota(session.principal as Principal, command.root)));
  return ok('GETQUOTA completed');
};

export const getQuotaRoot: Handler<'GETQUOTAROOT'> = async (session, command, backend) => {
  const roots = await backend.quotaRoots(session.principal as Principal, command.mailbox);
  session.send(untagged([atom('QUOTAROOT'), wireName(command.mailbox), ...roots.map((r) => r.name)]));
  for (const root of roots) session.send(quotaResponse(root));
  return ok('GETQUOTAROOT completed');
};

// ---- IDLE: RFC 2177 ----

export const idle: Handler<'IDLE'> = async (session, _command, backend) => {
  const user = session.principal as Principal;
  const sel = session.selected;
  let wake = () => {};
  let dirty = true; // sync once at the start: changes may have come since the last command
  const stopWatching = sel ? await backend.watch(user, sel.snapshot.mailboxId, () => ((dirty = true), wake())) : null;
  const done = new AbortController();
  try {
    session.send(Buffer.from('+ idling\r\n'));
    let ended = false;
    const line = session.readLine(done.signal).then((l) => {
      ended = true;
      wake();
      return l;
    });
    while (!ended) {
      if (dirty && session.selected) {
        dirty = false;
        try {
          await syncSelected(session, backend, { expunges: true });
        } catch (err) {
          if (err instanceof BackendError && err.code === 'nonexistent') {
            return { status: 'NO', code: { code: 'NONEXISTENT' }, text: 'the mailbox was deleted', close: true };
          }
          throw err;
        }
      }
      if (ended || dirty) continue;
      await new Promise<void>((resolve) => (wake = resolve));
    }
    const text = await line;
    if (text === null) return { status: 'BAD', text: 'connection closed during IDLE', close: true };
    // RFC 2177 §3: the client ends IDLE with "DONE".
    if (text.toString('latin1').trim().toUpperCase() !== 'DONE') return { status: 'BAD', text: 'expected DONE' };
    return ok('IDLE terminated');
  } finally {
    done.abort();
    stopWatching?.();
  }
};
