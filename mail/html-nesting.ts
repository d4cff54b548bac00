// How deep an HTML document's elements nest, as htmlparser2 builds them: the parser under html-to-text (the
// text alternative of an html-only message, mail/compose.ts) and, in its own copy, under sanitize-html (the
// webmail's view of received HTML, core/webmail-html.ts).
//
// That parser keeps its open elements in an array that it grows and shrinks at the front, so every start and end
// tag costs as much as the depth it is at: elements nested n deep cost n² (100,000 nested <div>s, 1.1 MB, took
// sanitize-html 10 s), and html-to-text's recursive walk of a tree some 10,000 deep overflows the stack. Browsers
// stop nesting at 512 (deeper elements become siblings); no mail that a person can read nests deeper. Stopping a
// parse as soon as it passes that depth bounds its cost by the input's length times 512 (docs/decisions.md #65).
//
// The parser reports every element it opens, void and implied ones included, and every one it closes, implied
// closes included, so opens minus closes is the depth of its stack, whatever its rules for tag soup: nothing here
// models them. htmlparser2 is pinned to the version html-to-text resolves (test/mail/html-nesting.test.ts).
import { Parser } from 'htmlparser2';

/** Where browsers stop nesting elements (Chromium's and WebKit's HTML parsers). */
export const MAX_HTML_DEPTH = 512;

export class HtmlTooDeep extends Error {
  readonly max: number;
  constructor(max: number) {
    super(`HTML elements nested deeper than ${max}`);
    this.max = max;
    this.name = 'HtmlTooDeep';
  }
}

/** Counters for a parser's open and close events; `open` throws HtmlTooDeep once the depth passes `max`. */
export function depthGuard(max: number = MAX_HTML_DEPTH): { open(): void; close(): void } {
  let depth = 0;
  return {
    open() {
      if (++depth > max) throw new HtmlTooDeep(max);
    },
    close() {
      depth--;
    },
  };
}

/**
 * Whether htmlparser2 nests `html`'s elements at most `max` deep; it stops reading once they go deeper. Html with at
 * most `max` '<' is not parsed: the parser opens an element only at a '<' (a start tag, or a `</p>` or `</br>` it
 * opens to close), so it cannot nest deeper. The parse of 10 kB of html with 264 '<' costs ~38 µs (a tenth of
 * html-to-text's time for it), finding its '<' ~2.7.
 */
export function nestsWithin(html: string, max: number = MAX_HTML_DEPTH): boolean {
  if (atMostLessThans(html, max)) return true;
  const guard = depthGuard(max);
  try {
    // Only the tree's shape is wanted: no entity decoding, no attributes, no text.
    new Parser({ onopentagname: guard.open, onclosetag: guard.close }, { decodeEntities: false }).end(html);
    return true;
  } catch (e) {
    if (e instanceof HtmlTooDeep) return false;
    throw e;
  }
}

/** Whether `html` holds at most `max` '<': a native search for each, stopped at the one past `max`. */
function atMostLessThans(html: string, max: number): boolean {
  let at = -1;
  for (let found = 0; found <= max; found++) {
    at = html.indexOf('<', at + 1);
    if (at < 0) return true;
  }
  return false;
}
