// mail/html-nesting.ts: the depth of htmlparser2's stack, counted from its events, and a parse stopped past it.
import t from 'tap';
import { createRequire } from 'node:module';
import { Parser } from 'htmlparser2';
import { depthGuard, HtmlTooDeep, MAX_HTML_DEPTH, nestsWithin } from '../../mail/html-nesting.js';

const require = createRequire(import.meta.url);

t.test('htmlparser2 is the one html-to-text parses with', async (t) => {
  const theirs = createRequire(require.resolve('html-to-text')).resolve('htmlparser2');
  t.equal(theirs, require.resolve('htmlparser2'), 'a pin that drifted from html-to-text would measure another parser');
});

t.test('the depth counted from open and close events is the parser stack’s, whatever the tag soup', async (t) => {
  // Tags with htmlparser2's special rules: implied closes (p, li, td, tr, option, headings, form controls), void
  // elements, </p> and </br> without a start, a second <form>, self-closing ones inside svg and math.
  const tags = [
    'p', '/p', 'div', '/div', 'li', '/li', 'ul', 'td', 'tr', 'th', '/tr', 'table', 'tbody', 'option', 'select',
    'h1', 'h2', '/h1', 'br', '/br', 'img', 'hr', 'input', 'form', '/form', 'svg', '/svg', 'math', 'mi', 'path/',
    'div/', 'a', '/a', 'b', '/b', 'title', '/title', 'dd', 'dt', 'rt', 'button', 'textarea', '/textarea', 'xyz',
  ]; // prettier-ignore
  let seed = 0x9e3779b9;
  // xorshift32: the same soups every run.
  const random = (n: number) => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
  for (let round = 0; round < 400; round++) {
    const html = Array.from({ length: 60 }, () => `<${tags[random(tags.length)]}>x`).join('');
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

t.test('nestsWithin: 512 deep is within, 513 is not; siblings are not depth', async (t) => {
  const nested = (n: number) => '<div>'.repeat(n) + 'x' + '</div>'.repeat(n);
  t.equal(nestsWithin(nested(MAX_HTML_DEPTH)), true);
  t.equal(nestsWithin(nested(MAX_HTML_DEPTH + 1)), false);
  t.equal(nestsWithin('<p>a</p>'.repeat(10_000) + '<br>'.repeat(10_000) + '<li>b'.repeat(10_000)), true);
  t.equal(nestsWithin('<b>'.repeat(600)), false, 'unclosed inline elements nest');
  t.equal(nestsWithin('<form>'.repeat(600)), false, 'so do forms in this version of the parser');
});

t.test('a guard throws HtmlTooDeep past its depth and counts closes back down', async (t) => {
  const g = depthGuard(2);
  g.open();
  g.open();
  g.close();
  g.open();
  t.throws(() => g.open(), HtmlTooDeep);
});

// 200,000 nested elements cost the parser minutes (depth squared); stopped at 512 they cost a moment. a
// timeout judges here (30 s), not a measured time.
t.test('a parse of elements nested 200,000 deep stops at the limit', { timeout: 30_000 }, async (t) => {
  t.equal(nestsWithin('<div>'.repeat(200_000) + 'x' + '</div>'.repeat(200_000)), false);
  t.equal(nestsWithin('<span>'.repeat(200_000)), false);
});
