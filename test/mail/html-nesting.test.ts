// mail/html-nesting.ts: the depth of htmlparser2's stack, counted from its events (test/mail/html-alternative.test.ts
// has a parse stopped past it).
import t from 'tap';
import { Parser } from 'htmlparser2';
import { depthGuard, HtmlTooDeep } from '../../mail/html-nesting.js';

// Tags with htmlparser2's special rules: implied closes (p, li, td, tr, option, headings, form controls), void
// elements, </p> and </br> without a start, a second <form>, self-closing ones inside svg and math.
const tags = [
  'p', '/p', 'div', '/div', 'li', '/li', 'ul', 'td', 'tr', 'th', '/tr', 'table', 'tbody', 'option', 'select',
  'h1', 'h2', '/h1', 'br', '/br', 'img', 'hr', 'input', 'form', '/form', 'svg', '/svg', 'math', 'mi', 'path/',
  'div/', 'a', '/a', 'b', '/b', 'title', '/title', 'dd', 'dt', 'rt', 'button', 'textarea', '/textarea', 'xyz',
]; // prettier-ignore

/** Tag soups of `length(random)` tags, the same every run (xorshift32 from a fixed seed). */
function soups(length: (random: (n: number) => number) => number) {
  let seed = 0x9e3779b9;
  const random = (n: number) => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  return { next: () => Array.from({ length: length(random) }, () => `<${tags[random(tags.length)]}>x`).join('') };
}

t.test('the depth counted from open and close events is the parser stack’s, whatever the tag soup', async (t) => {
  const soup = soups(() => 60);
  for (let round = 0; round < 400; round++) {
    const html = soup.next();
    let depth = 0;
    let wrong = '';
    // The parser's open-element stack is private to it: read here only to check the count against it. At each
    // open the count is the stack's depth, one more while a void element (never on the stack) opens.
    const stackOf = () => (parser as unknown as { stack: string[] }).stack.length;
    const parser: Parser = new Parser({
      onopentagname(name) {
        depth++;
        if (depth < stackOf() || depth > stackOf() + 1)
          wrong ||= `${depth} counted at <${name}>, ${stackOf()} on the stack`;
      },
      onclosetag() {
        depth--;
      },
    });
    parser.end(html);
    t.equal(wrong, '', html);
  }
});

t.test('a guard throws HtmlTooDeep past its depth and counts closes back down', async (t) => {
  const g = depthGuard(2);
  g.open();
  g.open();
  g.close();
  g.open();
  t.throws(() => g.open(), HtmlTooDeep);
});
