// The command grammar (RFC 3501 §9 and the extensions we speak) over a command the reader delivered:
// `tag SP command`, into a TaggedCommand (imap/command-types.ts). A command that does not parse throws a
// ParseError that carries the tag when it was read, so the session can answer `<tag> BAD <why>`.
import { Cursor, ParseError } from './syntax.js';
import { parseSequenceSet, type SequenceSet } from './sequence-set.js';
import { parseFetchAttributes, parseFetchModifiers } from './parse-fetch.js';
import { parseSearch } from './parse-search.js';
import { ID_MAX_FIELD_BYTES, ID_MAX_PAIRS, ID_MAX_VALUE_BYTES } from './limits.js';
import type { RawCommand } from './reader.js';
import type { Command, ListOptions, StatusItem, StoreAction, TaggedCommand } from './command-types.js';

export { ParseError } from './syntax.js';

/** A ParseError with the tag it answers (null when the line had no readable tag: answered `* BAD`). */
export class CommandError extends Error {
  readonly tag: string | null;
  readonly error: ParseError;
  constructor(tag: string | null, error: ParseError) {
    super(error.message);
    this.tag = tag;
    this.error = error;
  }
}

/** RFC 3501 §9 `tag` = 1*<any ASTRING-CHAR except "+">. */
const TAG = /^[^\x00-\x20(){%*"\\+\x7f-\xff]+$/;

export function parseCommand(raw: RawCommand): TaggedCommand {
  const c = new Cursor(raw);
  let tag: string | null = null;
  try {
    const t = c.word('a tag');
    if (!TAG.test(t)) c.fail('bad tag');
    tag = t;
    c.space();
    const command = parseBody(c);
    c.end();
    return { tag, command };
  } catch (err) {
    if (err instanceof ParseError) throw new CommandError(tag, err);
    throw err;
  }
}

/** Text of a string argument. User names, passwords and quota roots are UTF-8 (RFC 9051 §6.2.3). */
const utf8 = (b: Buffer): string => b.toString('utf8');

function sequenceSet(c: Cursor): SequenceSet {
  c.space();
  const set = parseSequenceSet(c.word('a sequence set'));
  if (!set) c.fail('bad sequence set');
  return set;
}

function noArgs<N extends Command['name']>(name: N): Command {
  return { name } as Command;
}

function parseBody(c: Cursor): Command {
  const name = c.atom('a command name').toUpperCase();
  switch (name) {
    // RFC 3501 §6.1, §6.2.1, §6.4.1-3; RFC 3691 UNSELECT; RFC 2177 IDLE; RFC 2342 NAMESPACE.
    case 'CAPABILITY':
    case 'NOOP':
    case 'LOGOUT':
    case 'STARTTLS':
    case 'CHECK':
    case 'CLOSE':
    case 'EXPUNGE':
    case 'UNSELECT':
    case 'IDLE':
    case 'NAMESPACE':
      return noArgs(name);
    case 'AUTHENTICATE': {
      // RFC 3501 §6.2.2; RFC 4959 §3: an initial response, "=" for an empty one.
      c.space();
      const mechanism = c.atom('a SASL mechanism').toUpperCase();
      let initialResponse: string | null = null;
      if (!c.atEnd()) {
        c.space();
        const ir = c.word('an initial response');
        if (ir !== '=' && !/^[A-Za-z0-9+/]+={0,2}$/.test(ir)) c.fail('initial response is not base64');
        initialResponse = ir === '=' ? '' : ir;
      }
      return { name, mechanism, initialResponse };
    }
    case 'LOGIN': {
      // RFC 3501 §6.2.3: LOGIN SP userid SP password, both astring.
      c.space();
      const username = utf8(c.astring('a user name'));
      c.space();
      return { name, username, password: utf8(c.astring('a password')) };
    }
    case 'SELECT':
    case 'EXAMINE': {
      c.space();
      const mailbox = c.mailbox();
      let condstore = false;
      if (!c.atEnd()) {
        // RFC 7162 §3.1.8: select-param list; CONDSTORE is the one we know.
        c.space();
        c.expect('(', 'a select parameter list');
        do {
          if (!c.take('CONDSTORE')) c.fail('unknown select parameter');
          condstore = true;
        } while (!c.take(')') && (c.space(), true));
      }
      return { name, mailbox, condstore };
    }
    case 'CREATE':
    case 'DELETE':
    case 'SUBSCRIBE':
    case 'UNSUBSCRIBE':
      c.space();
      return { name, mailbox: c.mailbox() };
    case 'RENAME': {
      c.space();
      const from = c.mailbox();
      c.space();
      return { name, from, to: c.mailbox() };
    }
    case 'LIST':
      return parseList(c);
    case 'LSUB': {
      c.space();
      const reference = c.mailbox();
      c.space();
      return { name, reference, pattern: c.listMailbox() };
    }
    case 'STATUS': {
      // RFC 3501 §6.3.10: STATUS SP mailbox SP "(" status-att *(SP status-att) ")".
      c.space();
      const mailbox = c.mailbox();
      c.space();
      return { name, mailbox, items: statusItems(c) };
    }
    case 'APPEND':
      return parseAppend(c);
    case 'SEARCH':
      return { name, ...parseSearch(c) };
    case 'FETCH':
      return parseFetch(c, name);
    case 'STORE':
      return parseStore(c, name);
    case 'COPY':
    case 'MOVE': {
      // RFC 3501 §6.4.7; RFC 6851 §3.1.
      const set = sequenceSet(c);
      c.space();
      return { name, set, mailbox: c.mailbox() };
    }
    case 'UID':
      return parseUid(c);
    case 'ENABLE': {
      // RFC 5161 §3.1: ENABLE 1*(SP capability).
      const capabilities: string[] = [];
      do {
        c.space();
        capabilities.push(c.atom('a capability').toUpperCase());
      } while (!c.atEnd());
      return { name, capabilities };
    }
    case 'ID':
      return parseId(c);
    case 'GETQUOTA':
      // RFC 9208 §4.2: GETQUOTA SP quota-root-name (astring).
      c.space();
      return { name, root: utf8(c.astring('a quota root')) };
    case 'GETQUOTAROOT':
      c.space();
      return { name, mailbox: c.mailbox() };
    default:
      throw new ParseError(`unknown command ${name.slice(0, 40)}`);
  }
}

function parseUid(c: Cursor): Command {
  // RFC 3501 §6.4.8: "UID" SP (copy / fetch / search / store); RFC 4315 UID EXPUNGE; RFC 6851 UID MOVE.
  c.space();
  const sub = c.atom('a UID command').toUpperCase();
  switch (sub) {
    case 'FETCH':
      return parseFetch(c, 'UID FETCH');
    case 'STORE':
      return parseStore(c, 'UID STORE');
    case 'SEARCH':
      return { name: 'UID SEARCH', ...parseSearch(c) };
    case 'COPY':
    case 'MOVE': {
      const set = sequenceSet(c);
      c.space();
      return { name: sub === 'COPY' ? 'UID COPY' : 'UID MOVE', set, mailbox: c.mailbox() };
    }
    case 'EXPUNGE':
      return { name: 'UID EXPUNGE', set: sequenceSet(c) };
    default:
      throw new ParseError(`unknown command UID ${sub.slice(0, 40)}`);
  }
}

function parseFetch(c: Cursor, name: 'FETCH' | 'UID FETCH'): Command {
  const set = sequenceSet(c);
  c.space();
  const attributes = parseFetchAttributes(c);
  let changedSince: bigint | null = null;
  if (!c.atEnd()) {
    c.space();
    changedSince = parseFetchModifiers(c);
  }
  return { name, set, attributes, changedSince };
}

/**
 * RFC 3501 §6.4.6: STORE SP sequence-set SP store-att-flags, where store-att-flags =
 * (["+" / "-"] "FLAGS" [".SILENT"]) SP (flag-list / (flag *(SP flag))); RFC 7162 §3.1.3 puts
 * `(UNCHANGEDSINCE n)` before it.
 */
function parseStore(c: Cursor, name: 'STORE' | 'UID STORE'): Command {
  const set = sequenceSet(c);
  c.space();
  let unchangedSince: bigint | null = null;
  if (c.take('(')) {
    c.expect('UNCHANGEDSINCE ', 'UNCHANGEDSINCE');
    unchangedSince = c.modseq(true);
    c.expect(')');
    c.space();
  }
  const op: StoreAction['op'] = c.take('+') ? 'add' : c.take('-') ? 'remove' : 'replace';
  c.expect('FLAGS');
  const silent = c.take('.SILENT');
  c.space();
  let flags: string[];
  if (c.peek() === 0x28) flags = c.flagList();
  else {
    flags = [c.flag()];
    while (!c.atEnd()) {
      c.space();
      flags.push(c.flag());
    }
  }
  return { name, set, unchangedSince, action: { op, silent, flags } };
}

/** RFC 3501 §6.3.11: APPEND SP mailbox [SP flag-list] [SP date-time] SP literal. */
function parseAppend(c: Cursor): Command {
  c.space();
  const mailbox = c.mailbox();
  c.space();
  let flags: string[] = [];
  let date: Date | null = null;
  if (c.peek() === 0x28) {
    flags = c.flagList();
    c.space();
  }
  if (c.peek() === 0x22) {
    date = c.dateTime();
    c.space();
  }
  return { name: 'APPEND', mailbox, flags, date, message: c.literal() };
}

const STATUS_ITEMS: readonly StatusItem[] = [
  'MESSAGES',
  'RECENT',
  'UIDNEXT',
  'UIDVALIDITY',
  'UNSEEN',
  'HIGHESTMODSEQ',
  'APPENDLIMIT',
];

function statusItems(c: Cursor): StatusItem[] {
  c.expect('(', 'a status item list');
  const items: StatusItem[] = [];
  do {
    const item = c.atom('a status item').toUpperCase() as StatusItem;
    if (!STATUS_ITEMS.includes(item)) c.fail(`unknown status item ${item}`);
    if (!items.includes(item)) items.push(item);
  } while (!c.take(')') && (c.space(), true));
  return items;
}

/**
 * RFC 3501 §6.3.8: LIST SP mailbox SP list-mailbox. RFC 5258 §6 (LIST-EXTENDED) adds selection options
 * before the reference, a parenthesised list of patterns, and return options after; RFC 5819 adds
 * RETURN (STATUS (...)). Parsed here since it costs little; the handler decides what it honours.
 */
function parseList(c: Cursor): Command {
  c.space();
  const options: ListOptions = { selection: [], return: [], status: null };
  if (c.take('(')) {
    while (!c.take(')')) {
      if (options.selection.length > 0) c.space();
      const opt = c.atom('a selection option').toUpperCase();
      if (!['SUBSCRIBED', 'REMOTE', 'RECURSIVEMATCH', 'SPECIAL-USE'].includes(opt)) c.fail('unknown selection option');
      options.selection.push(opt as ListOptions['selection'][number]);
    }
    c.space();
  }
  const reference = c.mailbox();
  c.space();
  const patterns: string[] = [];
  if (c.take('(')) {
    do patterns.push(c.listMailbox());
    while (!c.take(')') && (c.space(), true));
  } else {
    patterns.push(c.listMailbox());
  }
  if (!c.atEnd()) {
    c.space();
    c.expect('RETURN ', 'RETURN');
    c.expect('(');
    while (!c.take(')')) {
      if (options.return.length > 0 || options.status) c.space();
      const opt = c.atom('a return option').toUpperCase();
      if (opt === 'STATUS') {
        c.space();
        options.status = statusItems(c);
      } else if (opt === 'SUBSCRIBED' || opt === 'CHILDREN' || opt === 'SPECIAL-USE') {
        options.return.push(opt);
      } else {
        c.fail('unknown return option');
      }
    }
  }
  return { name: 'LIST', reference, patterns, options };
}

/** RFC 2971 §4: "ID" SP id-params-list; id-params-list = "(" *(string SP nstring) ")" / nil. */
function parseId(c: Cursor): Command {
  c.space();
  if (c.take('NIL')) return { name: 'ID', params: null };
  c.expect('(', 'a parameter list or NIL');
  const params: Array<[string, string | null]> = [];
  while (!c.take(')')) {
    if (params.length > 0) c.space();
    const field = c.string('a field name');
    c.space();
    const value = c.nstring();
    // RFC 2971 §3.3: limits a client must keep, so a request over them is malformed.
    if (field.length > ID_MAX_FIELD_BYTES) c.fail('ID field name longer than 30 octets');
    if (value && value.length > ID_MAX_VALUE_BYTES) c.fail('ID value longer than 1024 octets');
    params.push([utf8(field), value ? utf8(value) : null]);
    if (params.length > ID_MAX_PAIRS) c.fail('more than 30 ID field-value pairs');
  }
  return { name: 'ID', params };
}
