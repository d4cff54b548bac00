// SEARCH criteria (RFC 3501 §6.4.4 and §9 `search-key`, RFC 7162 §3.1.5 MODSEQ) into a tree of keys.
// A list of keys is their AND; OR and NOT nest; a parenthesised list groups.
import { ParseError, type Cursor } from './syntax.js';
import { parseSequenceSet } from './sequence-set.js';
import { MAX_SEARCH_DEPTH } from './limits.js';
import type { DateSearchKey, FlagSearchKey, SearchKey, StringSearchKey } from './command-types.js';

const FLAG_KEYS: readonly FlagSearchKey[] = [
  'ALL',
  'ANSWERED',
  'DELETED',
  'DRAFT',
  'FLAGGED',
  'NEW',
  'OLD',
  'RECENT',
  'SEEN',
  'UNANSWERED',
  'UNDELETED',
  'UNDRAFT',
  'UNFLAGGED',
  'UNSEEN',
];
const STRING_KEYS: readonly StringSearchKey[] = ['BCC', 'BODY', 'CC', 'FROM', 'SUBJECT', 'TEXT', 'TO'];
const DATE_KEYS: readonly DateSearchKey[] = ['BEFORE', 'ON', 'SINCE', 'SENTBEFORE', 'SENTON', 'SENTSINCE'];

/**
 * RFC 3501 §6.4.4: US-ASCII must be supported; we also take UTF-8 (of which it is a subset). Any other
 * is `NO [BADCHARSET (...)]`, which names the ones we have.
 */
export const SEARCH_CHARSETS = ['US-ASCII', 'UTF-8'] as const;

/** `[SP "CHARSET" SP astring] 1*(SP search-key)`, after "SEARCH"; the space before the first is taken. */
export function parseSearch(c: Cursor): { charset: string | null; criteria: SearchKey } {
  c.space();
  let charset: string | null = null;
  if (c.take('CHARSET ')) {
    charset = c.astring('a charset').toString('latin1').toUpperCase();
    if (!(SEARCH_CHARSETS as readonly string[]).includes(charset)) {
      throw new ParseError(`charset ${charset} is not supported`, 'NO', {
        code: 'BADCHARSET',
        charsets: SEARCH_CHARSETS,
      });
    }
    c.space();
  }
  const operands = [searchKey(c, 0)];
  while (!c.atEnd()) {
    c.space();
    operands.push(searchKey(c, 0));
  }
  return { charset, criteria: operands.length === 1 ? (operands[0] as SearchKey) : { key: 'AND', operands } };
}

function word(c: Cursor): string {
  const w = c.word('a search key').toUpperCase();
  return w;
}

function text(c: Cursor, what: string): string {
  c.space();
  // Strings are compared as Unicode; with CHARSET US-ASCII an 8-bit octet is the client's error, and
  // decoding it as UTF-8 loses nothing a match could have used.
  return c.astring(what).toString('utf8');
}

function searchKey(c: Cursor, depth: number): SearchKey {
  if (depth > MAX_SEARCH_DEPTH) throw new ParseError('search keys nested too deeply');
  if (c.take('(')) {
    const operands = [searchKey(c, depth + 1)];
    while (!c.take(')')) {
      c.space();
      operands.push(searchKey(c, depth + 1));
    }
    return operands.length === 1 ? (operands[0] as SearchKey) : { key: 'AND', operands };
  }
  const first = c.peek();
  // RFC 3501 §9: search-key includes a bare sequence-set (message sequence numbers).
  if ((first >= 0x30 && first <= 0x39) || first === 0x2a) {
    const set = parseSequenceSet(c.word('a sequence set'));
    if (!set) c.fail('bad sequence set');
    return { key: 'SEQ', set };
  }
  const w = word(c);
  if ((FLAG_KEYS as readonly string[]).includes(w)) return { key: w as FlagSearchKey };
  if ((STRING_KEYS as readonly string[]).includes(w)) return { key: w as StringSearchKey, value: text(c, 'a string') };
  if ((DATE_KEYS as readonly string[]).includes(w)) {
    c.space();
    return { key: w as DateSearchKey, date: c.date() };
  }
  switch (w) {
    case 'KEYWORD':
    case 'UNKEYWORD':
      c.space();
      return { key: w, flag: c.atom('a keyword') };
    case 'HEADER': {
      const field = text(c, 'a header field name');
      return { key: 'HEADER', field, value: text(c, 'a string') };
    }
    case 'LARGER':
    case 'SMALLER':
      c.space();
      return { key: w, size: c.number('a size') };
    case 'UID': {
      c.space();
      const set = parseSequenceSet(c.word('a UID set'));
      if (!set) c.fail('bad UID set');
      return { key: 'UID', set };
    }
    case 'NOT':
      c.space();
      return { key: 'NOT', operand: searchKey(c, depth + 1) };
    case 'OR': {
      c.space();
      const left = searchKey(c, depth + 1);
      c.space();
      return { key: 'OR', left, right: searchKey(c, depth + 1) };
    }
    case 'MODSEQ':
      return modseqKey(c);
    default:
      throw new ParseError(`unknown search key ${w.slice(0, 40)}`);
  }
}

/**
 * RFC 7162 §3.1.5: "MODSEQ" [SP entry-name SP entry-type-req] SP mod-sequence-valzer, where entry-name
 * is a quoted "/flags/<flag>" and entry-type-req is "priv" / "shared" / "all".
 */
function modseqKey(c: Cursor): SearchKey {
  c.space();
  let entry: { name: string; type: 'priv' | 'shared' | 'all' } | null = null;
  if (c.peek() === 0x22) {
    const name = c.quoted().toString('utf8');
    c.space();
    const type = c.atom('an entry type').toLowerCase();
    if (type !== 'priv' && type !== 'shared' && type !== 'all') c.fail('entry type is not priv, shared or all');
    entry = { name, type };
    c.space();
  }
  return { key: 'MODSEQ', modseq: c.modseq(true), entry };
}
