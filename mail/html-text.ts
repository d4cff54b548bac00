// The words of an HTML document, for a preview line or for the text view of a message that has no text part.
// Not a renderer: tags go, the content of script, style, title and head goes with them, block elements end a
// line, character references are decoded, and whitespace is collapsed as a browser would outside <pre>.
//
// One pass, linear in the input whatever it holds (docs/decisions.md #65). Received HTML comes from anyone: the
// regexes this replaces (/<[^>]*>/g, /<style[\s\S]*?<\/style>/gi) restart at every "<" and scan to the end of
// the input when nothing closes the tag, so 280 kB of "<" took two minutes. Here each search starts where the
// last one ended, and a search that finds nothing ends the walk: nothing after it can close anything either.

// HTML §13.1.2: a start tag's name starts with an ASCII letter; "<" before anything else is text.
const isLetter = (c: number) => (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
// A tag name ends at whitespace, "/" or ">" (HTML §13.2.5.8, tag name state).
const NAME_END = /[\t\n\f\r />]/g;

// Elements whose content is no text to show: raw text (script, style), the title and the whole head.
const DROPPED = new Set(['script', 'style', 'title', 'head', 'template', 'noscript']);
// Their end tags, found from a position in any case (a lower-cased copy could differ in length: "İ" becomes two).
const END_TAG = new Map([...DROPPED].map((name) => [name, new RegExp(`</${name}`, 'gi')]));
// Elements that begin and end a line of their own (HTML's block-level flow content, roughly), and those that stand
// apart from their neighbours by an empty line as a paragraph does.
// prettier-ignore
const LINE = new Set([
  'address', 'article', 'aside', 'body', 'dd', 'details', 'div', 'dl', 'dt', 'figcaption', 'figure', 'footer',
  'form', 'header', 'hr', 'html', 'li', 'main', 'nav', 'section', 'summary', 'tbody', 'tfoot', 'thead', 'tr',
]);
const PARAGRAPH = new Set(['blockquote', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6', 'ol', 'p', 'pre', 'table', 'ul']);
// Table cells sit side by side: a space between them, not a line.
const CELL = new Set(['td', 'th']);

// Character references (HTML §13.5): bounded quantifiers, so the replacement is linear too.
const REFERENCE = /&(?:#[xX]([0-9a-fA-F]{1,6})|#([0-9]{1,7})|([a-zA-Z][a-zA-Z0-9]{1,31}));/g;
// prettier-ignore
const NAMED: Record<string, string> = {
  nbsp: ' ', amp: '&', lt: '<', gt: '>', quot: '"', apos: "'", copy: '©', reg: '®', trade: '™', hellip: '…',
  mdash: '—', ndash: '–', lsquo: '‘', rsquo: '’', ldquo: '“', rdquo: '”', laquo: '«', raquo: '»', bull: '•',
  middot: '·', euro: '€', pound: '£', yen: '¥', cent: '¢', deg: '°', times: '×', shy: '', zwnj: '', zwj: '',
};

function decodeReferences(text: string): string {
  if (!text.includes('&')) return text;
  return text.replace(REFERENCE, (all, hex: string | undefined, dec: string | undefined, name: string | undefined) => {
    if (name !== undefined) return NAMED[name.toLowerCase()] ?? all;
    const cp = hex !== undefined ? parseInt(hex, 16) : parseInt(dec!, 10);
    // NUL, surrogates and what lies past Unicode are no characters (HTML §13.2.5.80): a space, as before.
    return cp > 0 && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff) ? String.fromCodePoint(cp) : ' ';
  });
}

/** The text of `html`: lines for blocks, single spaces within them, at most one empty line in a row, trimmed. */
export function htmlText(html: string): string {
  const out: string[] = [];
  // Line breaks owed before the next text: 1 ends the line, 2 leaves an empty line. Breaks before any text and
  // after the last are none; those of nested blocks are one.
  let owed = 0;
  const text = (from: number, to: number) => {
    if (to <= from) return;
    const words = decodeReferences(html.slice(from, to)).replace(/[\t\n\f\r ]+/g, ' ');
    if (words === ' ') {
      if (!owed) out.push(words);
      return;
    }
    if (owed && out.length) out.push(owed === 2 ? '\n\n' : '\n');
    owed = 0;
    out.push(words);
  };
  let pos = 0;
  let textStart = 0;
  for (;;) {
    const lt = html.indexOf('<', pos);
    if (lt < 0 || lt + 1 >= html.length) break;
    const c = html.charCodeAt(lt + 1);
    const closing = c === 0x2f && isLetter(html.charCodeAt(lt + 2));
    if (!closing && !isLetter(c) && c !== 0x21 && c !== 0x3f) {
      // "<" followed by anything else is text (HTML §13.2.5.6).
      pos = lt + 1;
      continue;
    }
    text(textStart, lt);
    let end: number;
    if (html.startsWith('<!--', lt)) {
      // A comment ends at the first "-->" (or at "<!-->" itself).
      const close = html.startsWith('<!-->', lt) ? lt + 2 : html.indexOf('-->', lt + 4);
      if (close < 0) return finish(out);
      end = close + 3;
    } else {
      const gt = html.indexOf('>', lt + 1);
      if (gt < 0) return finish(out);
      end = gt + 1;
      if (c !== 0x21 && c !== 0x3f) {
        const nameStart = lt + (closing ? 2 : 1);
        NAME_END.lastIndex = nameStart;
        const m = NAME_END.exec(html);
        const name = html.slice(nameStart, m && m.index < gt ? m.index : gt).toLowerCase();
        // A <br> is a line of its own; two in a row leave an empty line.
        if (name === 'br') owed = Math.min(2, owed + 1);
        else if (PARAGRAPH.has(name)) owed = 2;
        else if (LINE.has(name)) owed ||= 1;
        else if (CELL.has(name) && !owed) out.push(' ');
        if (!closing && DROPPED.has(name) && html.charCodeAt(gt - 1) !== 0x2f) {
          // Everything up to the element's own end tag goes (HTML §13.2.6.4.4: script and style are raw text).
          const endTag = END_TAG.get(name)!;
          endTag.lastIndex = end;
          const close = endTag.exec(html);
          if (!close) return finish(out);
          const closeEnd = html.indexOf('>', close.index);
          if (closeEnd < 0) return finish(out);
          end = closeEnd + 1;
        }
      }
    }
    pos = textStart = end;
  }
  text(textStart, html.length);
  return finish(out);
}

/** Spaces around line breaks go, and the whole is trimmed. */
function finish(out: string[]): string {
  return out
    .join('')
    .replace(/ +/g, ' ')
    .replace(/ ?\n ?/g, '\n')
    .trim();
}
