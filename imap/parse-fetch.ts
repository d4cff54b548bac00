// FETCH's arguments (RFC 3501 §6.4.5 and §9 `fetch`, RFC 7162 §3.1.4): the macros, the attributes,
// BODY[section]<partial>, and the CHANGEDSINCE modifier.
import type { Cursor } from './syntax.js';
import type { FetchAttribute, Section, SectionText } from './command-types.js';

const SIMPLE = [
  'ENVELOPE',
  'FLAGS',
  'INTERNALDATE',
  'RFC822.HEADER',
  'RFC822.SIZE',
  'RFC822.TEXT',
  'RFC822',
  'BODYSTRUCTURE',
  'UID',
  'MODSEQ', // RFC 7162 §3.1.4.1
] as const;

/** RFC 3501 §6.4.5: the macros, which "may not be used with other data items". */
const MACROS: Record<string, FetchAttribute['kind'][]> = {
  ALL: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE'],
  FAST: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE'],
  FULL: ['FLAGS', 'INTERNALDATE', 'RFC822.SIZE', 'ENVELOPE', 'BODY'],
};

/** `"ALL" / "FULL" / "FAST" / fetch-att / "(" fetch-att *(SP fetch-att) ")"`. */
export function parseFetchAttributes(c: Cursor): FetchAttribute[] {
  for (const [macro, kinds] of Object.entries(MACROS)) {
    if (c.take(macro)) {
      const next = c.peek();
      if (next === -1 || next === 0x20) return kinds.map((kind) => ({ kind }) as FetchAttribute);
      c.fail('unknown FETCH item');
    }
  }
  if (!c.take('(')) return [fetchAttribute(c)];
  const atts: FetchAttribute[] = [];
  while (!c.take(')')) {
    if (atts.length > 0) c.space();
    atts.push(fetchAttribute(c));
  }
  if (atts.length === 0) c.fail('empty FETCH item list');
  return atts;
}

function fetchAttribute(c: Cursor): FetchAttribute {
  const peek = c.take('BODY.PEEK[');
  if (peek || c.take('BODY[')) {
    const section = parseSection(c);
    return { kind: 'BODY[]', peek, section, partial: parsePartial(c) };
  }
  for (const kind of SIMPLE) {
    if (c.take(kind) && boundary(c)) return { kind };
  }
  // After BODYSTRUCTURE failed, "BODY" alone is the non-extensible structure.
  if (c.take('BODY') && boundary(c)) return { kind: 'BODY' };
  c.fail('unknown FETCH item');
}

/** An item name ends at a space, a ")" or the end of the line; "RFC822X" is no item. */
function boundary(c: Cursor): boolean {
  const n = c.peek();
  return n === -1 || n === 0x20 || n === 0x29;
}

/**
 * The inside of RFC 3501 §9 `section`, after "[": section-spec = section-msgtext / (section-part
 * ["." section-text]); section-text adds "MIME", which needs a part number.
 */
export function parseSection(c: Cursor): Section {
  const part: number[] = [];
  const digit = (): boolean => c.peek() >= 0x31 && c.peek() <= 0x39;
  let dot = false; // a "." after the last part number, which section-text must follow
  while (digit()) {
    part.push(c.nzNumber('a part number'));
    dot = c.take('.');
    if (!dot) break;
  }
  const section: Section = { part, text: null, fields: null };
  if (c.take(']')) {
    if (dot) c.fail('section ends in "."');
    return section;
  }
  if (part.length > 0 && !dot) c.fail('expected "." or "]" after the part number');
  const texts: SectionText[] = ['HEADER.FIELDS.NOT', 'HEADER.FIELDS', 'HEADER', 'TEXT', 'MIME'];
  const text = texts.find((t) => c.take(t));
  if (!text) c.fail('expected a section');
  if (text === 'MIME' && part.length === 0) c.fail('MIME needs a part number');
  section.text = text;
  if (text === 'HEADER.FIELDS' || text === 'HEADER.FIELDS.NOT') {
    c.space();
    // RFC 3501 §9 header-list = "(" header-fld-name *(SP header-fld-name) ")"; header-fld-name = astring.
    c.expect('(', 'a header field list');
    const fields: string[] = [];
    do {
      fields.push(c.astring('a header field name').toString('latin1'));
    } while (!c.take(')') && (c.space(), true));
    section.fields = fields;
  }
  c.expect(']');
  return section;
}

/** RFC 3501 §9: "<" number "." nz-number ">" after a section. */
function parsePartial(c: Cursor): { offset: number; length: number } | null {
  if (!c.take('<')) return null;
  const offset = c.number('a partial offset');
  c.expect('.');
  const length = c.nzNumber('a partial length');
  c.expect('>');
  return { offset, length };
}

/** RFC 7162 §3.1.4.1: fetch-modifier list `(CHANGEDSINCE n)`; VANISHED (QRESYNC) is not offered. */
export function parseFetchModifiers(c: Cursor): bigint | null {
  c.expect('(', 'a FETCH modifier list');
  let changedSince: bigint | null = null;
  do {
    if (!c.take('CHANGEDSINCE')) c.fail('unknown FETCH modifier');
    if (changedSince !== null) c.fail('CHANGEDSINCE given twice');
    c.space();
    changedSince = c.modseq(false);
  } while (!c.take(')') && (c.space(), true));
  return changedSince;
}
