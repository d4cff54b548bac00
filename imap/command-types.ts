// What the parser produces: one typed value per command, a discriminated union on `name`. UID forms are
// commands of their own ("UID FETCH"), so the command table can give each its states and handler.
import type { SequenceSet } from './sequence-set.js';

/** RFC 3501 §9 `date`: SEARCH compares dates "disregarding time and timezone". */
export interface ImapDate {
  year: number;
  month: number; // 1-12
  day: number;
}

// ---- FETCH (RFC 3501 §6.4.5, RFC 7162 §3.1.4) ----

export type SectionText = 'HEADER' | 'HEADER.FIELDS' | 'HEADER.FIELDS.NOT' | 'TEXT' | 'MIME';

/** RFC 3501 §9 `section-spec`: `part` is [] for the whole message; `fields` only with HEADER.FIELDS[.NOT]. */
export interface Section {
  part: number[];
  text: SectionText | null;
  fields: string[] | null;
}

export type FetchAttribute =
  | {
      kind:
        | 'ENVELOPE'
        | 'FLAGS'
        | 'INTERNALDATE'
        | 'RFC822'
        | 'RFC822.HEADER'
        | 'RFC822.SIZE'
        | 'RFC822.TEXT'
        | 'BODY'
        | 'BODYSTRUCTURE'
        | 'UID'
        | 'MODSEQ';
    }
  /** BODY[section]<origin.length> and BODY.PEEK[...]; `partial` from RFC 3501 §6.4.5. */
  | { kind: 'BODY[]'; peek: boolean; section: Section; partial: { offset: number; length: number } | null };

// ---- SEARCH (RFC 3501 §6.4.4, RFC 7162 §3.1.5) ----

export type FlagSearchKey =
  | 'ALL'
  | 'ANSWERED'
  | 'DELETED'
  | 'DRAFT'
  | 'FLAGGED'
  | 'NEW'
  | 'OLD'
  | 'RECENT'
  | 'SEEN'
  | 'UNANSWERED'
  | 'UNDELETED'
  | 'UNDRAFT'
  | 'UNFLAGGED'
  | 'UNSEEN';
export type StringSearchKey = 'BCC' | 'BODY' | 'CC' | 'FROM' | 'SUBJECT' | 'TEXT' | 'TO';
export type DateSearchKey = 'BEFORE' | 'ON' | 'SINCE' | 'SENTBEFORE' | 'SENTON' | 'SENTSINCE';

export type SearchKey =
  | { key: FlagSearchKey }
  | { key: StringSearchKey; value: string }
  | { key: 'KEYWORD' | 'UNKEYWORD'; flag: string }
  | { key: DateSearchKey; date: ImapDate }
  | { key: 'HEADER'; field: string; value: string }
  | { key: 'LARGER' | 'SMALLER'; size: number }
  | { key: 'UID'; set: SequenceSet }
  | { key: 'SEQ'; set: SequenceSet }
  | { key: 'NOT'; operand: SearchKey }
  | { key: 'OR'; left: SearchKey; right: SearchKey }
  /** A parenthesised list, and the top level: every operand must match. */
  | { key: 'AND'; operands: SearchKey[] }
  /** RFC 7162 §3.1.5: `entry` names a flag's metadata item, which we accept and do not distinguish. */
  | { key: 'MODSEQ'; modseq: bigint; entry: { name: string; type: 'priv' | 'shared' | 'all' } | null };

// ---- STORE, STATUS, LIST ----

export interface StoreAction {
  /** RFC 3501 §6.4.6: FLAGS replaces, +FLAGS adds, -FLAGS removes; .SILENT suppresses the FETCH responses. */
  op: 'replace' | 'add' | 'remove';
  silent: boolean;
  flags: string[];
}

export type StatusItem =
  | 'MESSAGES'
  | 'RECENT'
  | 'UIDNEXT'
  | 'UIDVALIDITY'
  | 'UNSEEN'
  | 'HIGHESTMODSEQ' // RFC 7162 §3.1.6
  | 'APPENDLIMIT'; // RFC 7889 §2

/** RFC 5258 §3 (LIST-EXTENDED), parsed but not advertised; RFC 3501's LIST is the case of none of them. */
export interface ListOptions {
  selection: Array<'SUBSCRIBED' | 'REMOTE' | 'RECURSIVEMATCH' | 'SPECIAL-USE'>;
  return: Array<'SUBSCRIBED' | 'CHILDREN' | 'SPECIAL-USE'>;
  /** RFC 5819 LIST-STATUS: RETURN (STATUS (...)). */
  status: StatusItem[] | null;
}

// ---- the commands ----

export type Command =
  | { name: 'CAPABILITY' | 'NOOP' | 'LOGOUT' | 'STARTTLS' | 'CHECK' | 'CLOSE' | 'EXPUNGE' }
  | { name: 'UNSELECT' | 'IDLE' | 'NAMESPACE' }
  /** RFC 4959 (SASL-IR): the initial response as sent, "" for "=". */
  | { name: 'AUTHENTICATE'; mechanism: string; initialResponse: string | null }
  | { name: 'LOGIN'; username: string; password: string }
  /** RFC 7162 §3.1.8: SELECT/EXAMINE (CONDSTORE). */
  | { name: 'SELECT' | 'EXAMINE'; mailbox: string; condstore: boolean }
  | { name: 'CREATE' | 'DELETE' | 'SUBSCRIBE' | 'UNSUBSCRIBE'; mailbox: string }
  | { name: 'RENAME'; from: string; to: string }
  | { name: 'LIST'; reference: string; patterns: string[]; options: ListOptions }
  | { name: 'LSUB'; reference: string; pattern: string }
  | { name: 'STATUS'; mailbox: string; items: StatusItem[] }
  | { name: 'APPEND'; mailbox: string; flags: string[]; date: Date | null; message: Buffer }
  | { name: 'SEARCH' | 'UID SEARCH'; charset: string | null; criteria: SearchKey }
  | { name: 'FETCH' | 'UID FETCH'; set: SequenceSet; attributes: FetchAttribute[]; changedSince: bigint | null }
  | { name: 'STORE' | 'UID STORE'; set: SequenceSet; unchangedSince: bigint | null; action: StoreAction }
  | { name: 'COPY' | 'UID COPY' | 'MOVE' | 'UID MOVE'; set: SequenceSet; mailbox: string }
  | { name: 'UID EXPUNGE'; set: SequenceSet }
  | { name: 'ENABLE'; capabilities: string[] }
  /** RFC 2971: null for NIL; field names as sent (they compare case-insensitively). */
  | { name: 'ID'; params: Array<[string, string | null]> | null }
  | { name: 'GETQUOTA'; root: string }
  | { name: 'GETQUOTAROOT'; mailbox: string };

export type CommandName = Command['name'];
/**
 * The command of name N (or of any name in a union N), with `name` narrowed to N. Not Extract<>: several
 * names share one member of the union (CREATE, DELETE, SUBSCRIBE…), which Extract would drop for one name.
 */
export type CommandOf<N extends CommandName> = N extends CommandName ? OneCommand<N> : never;
type OneCommand<N extends CommandName> = Command extends infer C
  ? C extends { name: infer M }
    ? N extends M
      ? Omit<C, 'name'> & { name: N }
      : never
    : never
  : never;

export interface TaggedCommand {
  tag: string;
  command: Command;
}
