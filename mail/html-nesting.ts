// How deep an HTML document's elements nest, as htmlparser2 builds them: the parser of the text alternative of an
// html-only message (mail/html-alternative.ts) and, in its own copy, of sanitize-html (the webmail's view of
// received HTML, core/webmail-html.ts).
//
// That parser keeps its open elements in an array that it grows and shrinks at the front, so every start and end
// tag costs as much as the depth it is at: elements nested n deep cost n² (100,000 nested <div>s, 1.1 MB, took
// sanitize-html 10 s), and a recursive walk of a tree some 10,000 deep overflows the stack. Browsers
// stop nesting at 512 (deeper elements become siblings); no mail that a person can read nests deeper. Stopping a
// parse as soon as it passes that depth bounds its cost by the input's length times 512 (docs/decisions.md #65).
//
// The parser reports every element it opens, void and implied ones included, and every one it closes, implied
// closes included, so opens minus closes is the depth of its stack, whatever its rules for tag soup: nothing here
// models them.

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
