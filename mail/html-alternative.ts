// The text/plain alternative of an html-only send (mail/compose.ts): words in lines of at most 76 characters,
// paragraphs apart, headings in capitals, links as `text [url]`, list items with their marks, quotes with "> ",
// preformatted text as it stands, no images and nothing hidden (docs/decisions.md #87).
//
// One pass of htmlparser2's tokenizer, formatted from its events as they come: no tree, no recursion, no selector
// matching, linear in the input. The rules follow html-to-text's defaults (it made this text until #87, at two to five
// times the cost), but for these: table rows are lines and their cells stand apart (html-to-text ran the cells of a
// layout table together), hidden elements (`display: none`, `hidden`: a template's preheader and its filler of
// `&zwnj;&nbsp;`) are left out, a link whose text is its address is written once, an image link is named by its
// image's alt text, and a no-break space is a space.
//
// The parser reports every element it opens and every one it closes, implied and void ones included, in stack
// order (mail/html-nesting.ts): what an element changed is kept on a stack and undone at its close. Past
// MAX_HTML_DEPTH the parse stops and the html gets the plainer text of mail/html-text.ts, as html nested that deep
// costs the parser the square of its depth.
import { Parser } from 'htmlparser2';
import { depthGuard, HtmlTooDeep } from './html-nesting.js';
import { htmlText } from './html-text.js';

/** The widest line of words: within the 78 characters RFC 5322 §2.1.1 asks lines to keep to (as before #87). */
export const TEXT_WIDTH = 76;
/** Lines are never narrower than this, however deep the quotes and lists: their marks go past TEXT_WIDTH instead. */
const MIN_WIDTH = 20;

interface Rule {
  /** Line breaks before and after: 1 starts a line of its own, 2 leaves an empty line (the larger of two wins). */
  lines?: readonly [number, number];
  kind?: 'drop' | 'heading' | 'pre' | 'quote' | 'list' | 'item' | 'link' | 'break' | 'rule' | 'cell';
}

// What each element does; any other element is inline (its words flow with its neighbours').
// prettier-ignore
const RULES: ReadonlyMap<string, Rule> = new Map<string, Rule>([
  // No text to show: raw text (script, style), the head, templates, and images (their alt text is no reading).
  ...['script', 'style', 'head', 'title', 'template', 'noscript', 'img', 'svg', 'object', 'iframe']
    .map((n): [string, Rule] => [n, { kind: 'drop' }]),
  ...['address', 'article', 'aside', 'center', 'dd', 'div', 'dt', 'figcaption', 'figure', 'footer', 'form',
    'header', 'main', 'nav', 'section', 'summary', 'details', 'tr']
    .map((n): [string, Rule] => [n, { lines: [1, 1] }]),
  ...['p', 'table', 'dl'].map((n): [string, Rule] => [n, { lines: [2, 2] }]),
  ...['h1', 'h2', 'h3'].map((n): [string, Rule] => [n, { lines: [3, 2], kind: 'heading' }]),
  ...['h4', 'h5', 'h6'].map((n): [string, Rule] => [n, { lines: [2, 2], kind: 'heading' }]),
  ['pre', { lines: [2, 2], kind: 'pre' }],
  ['blockquote', { lines: [2, 2], kind: 'quote' }],
  ['ul', { lines: [2, 2], kind: 'list' }],
  ['ol', { lines: [2, 2], kind: 'list' }],
  ['li', { lines: [1, 1], kind: 'item' }],
  ['a', { kind: 'link' }],
  ['br', { kind: 'break' }],
  ['hr', { lines: [2, 2], kind: 'rule' }],
  ['td', { kind: 'cell' }],
  ['th', { kind: 'cell' }],
]);

// What html-to-text collapses (its whitespaceCharacters), and the no-break space.
const SPACE = /[ \t\r\n\f\u200b\u00a0]+/g;
// Whether SPACE changes a text (most have single spaces alone): a test costs less than a replace that finds nothing.
const COLLAPSES = /[\t\r\n\f\u200b\u00a0]| {2}/;
const HIDDEN = /(?:^|;)\s*display\s*:\s*none\s*(?:!important\s*)?(?:;|$)/i;

/** What an element changed, undone at its close. */
interface Open {
  rule: Rule | undefined;
  /** A list: its next item's number (null: a bullet list), its `type`, whether it is in an item of another. */
  list?: { next: number | null; type: string; nested: boolean };
  /** A link with an href: the href, and the text of the link it is inside (links do not nest, but tag soup can). */
  href?: string;
  outerLinkText?: string | null;
  /** A quote or an item: the margin it added. */
  margin?: boolean;
  /** Dropped (no reading, or hidden): the text inside is not written. */
  dropped?: boolean;
}

/** The margin of a line: a quote's "> ", an item's mark on its first line and spaces under the mark after. */
interface Margin {
  first: string;
  rest: string;
  used: boolean;
}

/** The text alternative of `html`: lines joined by LF, none with a space at its end, no empty line first or last. */
export function textAlternative(html: string): string {
  const out: string[] = [];
  /** Empty lines at the end of `out` (a <br> last adds them): taken off at the end. */
  let trailingBlanks = 0;
  const open: Open[] = [];
  const margins: Margin[] = [];
  /** The words of the line being written, and the margin it was started with. */
  let line = '';
  let linePrefix = '';
  /** Where the first space of `line` is, or -1: the line can be broken only there or after. */
  let firstSpace = -1;
  /** A space is owed before the next piece: the next word is another word. */
  let space = false;
  /** Line breaks owed before the next word (the most any block around it asked for). */
  let owed = 0;
  /** The words of the innermost link with an href, or null outside one. */
  let linkText: string | null = null;
  let dropped = 0;
  let headings = 0;
  let pre = 0;
  /** A pre's text has not started: the line end right after its start tag is not its text (HTML §13.2.6.4.7). */
  let preStart = false;

  const width = () => Math.max(MIN_WIDTH, TEXT_WIDTH - linePrefix.length);
  const quoteMarks = () => {
    let p = '';
    // A quote opened after the last line has not begun: the empty lines before it are outside it.
    for (let i = 0; i < margins.length && i < DRAWN_MARGINS; i++)
      if (margins[i]!.used && margins[i]!.first === QUOTE) p += '>';
    return p;
  };
  // What the text may still take: html made to grow (margins and line ends, as a deep quote's lines of "x<br>") gets
  // the plainer text of mail/html-text.ts instead, never longer than the html.
  let budget = html.length * MAX_GROWTH + 1024;
  const pushLine = (s: string) => {
    if ((budget -= s.length + 1) < 0) throw new TooLong();
    out.push(s);
    trailingBlanks = 0;
  };
  const pushBlank = () => {
    if (out.length === 0) return;
    const marks = quoteMarks();
    if ((budget -= marks.length + 1) < 0) throw new TooLong();
    out.push(marks);
    trailingBlanks++;
  };

  /** Ends the line being written, if it holds anything. */
  function endLine() {
    if (line === '') return;
    pushLine((linePrefix + line).trimEnd());
    line = '';
    firstSpace = -1;
  }
  /** Starts a new line with the current margins: an item's mark on its first line only. */
  function newLine() {
    linePrefix = '';
    for (let i = 0; i < margins.length; i++) {
      const m = margins[i]!;
      if (i < DRAWN_MARGINS) linePrefix += m.used ? m.rest : m.first;
      m.used = true;
    }
  }
  /** Before anything is written: the line breaks owed, then a margin if the line is new. */
  function beforeWriting() {
    if (owed > 0) {
      endLine();
      for (let i = 1; i < owed; i++) pushBlank();
      owed = 0;
      space = false;
    }
    if (line === '') {
      newLine();
      space = false;
    }
  }
  /**
   * Words with single spaces between them and none at either end: after the line being written, with a space first
   * when one is owed (else they go on the word before: "Hel<b>lo</b>"). Lines are broken at the last space that
   * leaves them within the width; a word longer than a line stays whole, on a line of its own.
   */
  function write(words: string) {
    beforeWriting();
    if (space && line !== '') {
      if (firstSpace < 0) firstSpace = line.length;
      line += ' ';
      if (linkText) linkText += ' ';
    }
    space = false;
    if (firstSpace < 0 && words.includes(' ')) firstSpace = line.length + words.indexOf(' ');
    line += words;
    if (linkText !== null) linkText += words;
    // A line without a space is one word, however long: nothing to look for (a word of 150,000 pieces would cost
    // the square of its length to search at each piece).
    for (let w = width(); line.length > w && firstSpace >= 0; w = width()) {
      const at = firstSpace > w ? firstSpace : line.lastIndexOf(' ', w);
      pushLine((linePrefix + line.slice(0, at)).trimEnd());
      line = line.slice(at + 1);
      firstSpace = line.indexOf(' ');
      newLine();
    }
  }
  /** Text as HTML shows it outside a pre: each run of spaces and line ends one space. */
  function addText(text: string) {
    if (pre > 0) return addPre(text);
    let words = COLLAPSES.test(text) ? text.replace(SPACE, ' ') : text;
    if (words.charCodeAt(0) === 0x20) {
      space = true;
      words = words.slice(1);
    }
    const spaceAfter = words.charCodeAt(words.length - 1) === 0x20;
    if (spaceAfter) words = words.slice(0, -1);
    if (words !== '') write(headings > 0 ? words.toUpperCase() : words);
    if (spaceAfter) space = true;
  }
  /** Preformatted text: its spaces and line ends as they stand, not wrapped. */
  function addPre(text: string) {
    if (preStart) text = text.replace(/^\r?\n/, '');
    preStart = false;
    const lines = text.split(LINE_END);
    for (let i = 0; i < lines.length; i++) {
      if (i > 0) {
        if (line === '') {
          beforeWriting();
          pushBlank();
        } else endLine();
      }
      if (lines[i] === '') continue;
      beforeWriting();
      line += lines[i];
      if (linkText !== null) linkText += lines[i];
    }
  }

  // Every element the parser opens is on `open` from its name on, so that each close takes its own off (a start tag
  // the input ends inside gets its name and its close but never its attributes); what it does starts with them.
  function onopentagname(name: string) {
    guard.open();
    open.push({ rule: RULES.get(name) });
  }

  function onopentag(name: string, attribs: Record<string, string>) {
    const o = open[open.length - 1]!;
    const rule = o.rule;
    if (dropped > 0 || rule?.kind === 'drop' || Object.hasOwn(attribs, 'hidden') || HIDDEN.test(attribs.style ?? '')) {
      // An image is no reading, but in a link with no words yet its alt text is the link's name (as a screen reader
      // names it): "Shop [url]" rather than a bare address for a logo or a button drawn as a picture.
      const alt = name === 'img' && dropped === 0 && linkText === '' ? (attribs.alt ?? '').trim() : '';
      if (alt !== '') addText(alt);
      o.dropped = true;
      dropped++;
      return;
    }
    if (!rule) return;
    switch (rule.kind) {
      case 'heading':
        headings++;
        break;
      case 'pre':
        pre++;
        preStart = true;
        break;
      case 'quote':
        margins.push({ first: QUOTE, rest: QUOTE, used: false });
        o.margin = true;
        break;
      case 'list':
        o.list = {
          next: name === 'ol' ? listStart(attribs.start) : null,
          type: attribs.type ?? '1',
          nested: innermost('item') !== undefined,
        };
        break;
      case 'item': {
        // An item outside a list (tag soup) is marked as one of a bullet list.
        const list = innermost('list')?.list ?? { next: null, type: '1', nested: false };
        const mark = list.next === null ? '* ' : `${listMark(list.next++, list.type)}. `;
        const first = list.nested ? mark : ` ${mark}`;
        margins.push({ first, rest: ' '.repeat(first.length), used: false });
        o.margin = true;
        break;
      }
      case 'link': {
        const href = (attribs.href ?? '').trim().replace(/^mailto:/i, '');
        if (href !== '' && !href.startsWith('#')) {
          o.href = href;
          o.outerLinkText = linkText;
          linkText = '';
        }
        break;
      }
      case 'break':
        if (line === '') {
          beforeWriting();
          pushBlank();
        } else endLine();
        break;
      case 'rule':
        owed = Math.max(owed, 2);
        beforeWriting();
        write('-'.repeat(width()));
        break;
      case 'cell':
        space = true;
        break;
    }
    if (rule.lines) owed = Math.max(owed, o.list?.nested ? 1 : rule.lines[0]);
  }

  function onclosetag() {
    guard.close();
    const o = open.pop();
    if (o?.dropped) dropped--;
    const rule = o?.rule;
    if (!o || !rule || o.dropped) return;
    if (o.href !== undefined) {
      // A link's text, then its address; its address alone when it has no text (an image's link); its text alone
      // when that is the address.
      const text = linkText;
      linkText = o.outerLinkText ?? null;
      if (text === '') write(o.href);
      else if (text !== o.href) {
        space = true;
        write(`[${o.href}]`);
      }
    }
    if (rule.kind === 'heading') headings--;
    if (rule.kind === 'pre') pre--;
    if (rule.kind === 'cell') space = true;
    if (o.margin) {
      // The margin ends with its element, and so does the line being written.
      endLine();
      margins.pop();
    }
    if (rule.lines) owed = Math.max(owed, o.list?.nested ? 1 : rule.lines[1]);
  }

  /** The innermost open element of a kind, the one just opened aside. */
  function innermost(kind: Rule['kind']): Open | undefined {
    for (let i = open.length - 2; i >= 0; i--) if (open[i]!.rule?.kind === kind && !open[i]!.dropped) return open[i];
    return undefined;
  }

  const guard = depthGuard();
  try {
    const handler = { onopentagname, onopentag, onclosetag, ontext: (text: string) => dropped === 0 && addText(text) };
    new Parser(handler, { decodeEntities: true }).end(html);
    endLine();
  } catch (e) {
    if (e instanceof HtmlTooDeep || e instanceof TooLong) return htmlText(html);
    throw e;
  }
  out.length -= trailingBlanks;
  return out.join('\n');
}

const QUOTE = '> ';
/** The text is at most this many times the html's length, and a kilobyte (`budget`). */
const MAX_GROWTH = 3;
/** The text would pass its budget. */
class TooLong extends Error {}
/**
 * The margins drawn, outermost first: quotes and lists nested deeper than this draw none of their own, and a line's
 * margin stays within a few dozen characters.
 */
const DRAWN_MARGINS = 8;
const LINE_END = /\r\n|\r|\n/;

/** An ordered list's first number: its `start` (HTML §4.4.5: a valid integer, zero and below included), else 1. */
function listStart(start: string | undefined): number {
  const n = Number.parseInt(start ?? '', 10);
  return Number.isSafeInteger(n) ? n : 1;
}

/** An ordered list's mark for item `n` by its `type` (HTML §4.4.5): 1, a, A, i or I. */
function listMark(n: number, type: string): string {
  if (n < 1 || (type !== 'a' && type !== 'A' && type !== 'i' && type !== 'I')) return String(n);
  if (type === 'a' || type === 'A') {
    let s = '';
    for (let k = n; k > 0; k = Math.floor((k - 1) / 26)) s = String.fromCharCode(97 + ((k - 1) % 26)) + s;
    return type === 'A' ? s.toUpperCase() : s;
  }
  if (n >= 4000) return String(n);
  let s = '';
  let k = n;
  for (const [v, r] of ROMAN) for (; k >= v; k -= v) s += r;
  return type === 'I' ? s.toUpperCase() : s;
}

const ROMAN: readonly [number, string][] = [
  [1000, 'm'],
  [900, 'cm'],
  [500, 'd'],
  [400, 'cd'],
  [100, 'c'],
  [90, 'xc'],
  [50, 'l'],
  [40, 'xl'],
  [10, 'x'],
  [9, 'ix'],
  [5, 'v'],
  [4, 'iv'],
  [1, 'i'],
];
