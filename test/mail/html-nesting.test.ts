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
  return {
    next: () => Array.from({ length: length(random) }, () => `<${tags[random(tags.length)]}>x`).join(''),
    random,
  };
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

t.test('nestsWithin: 512 deep is within, 513 is not; siblings are not depth', async (t) => {
  const nested = (n: number) => '<div>'.repeat(n) + 'x' + '</div>'.repeat(n);
  t.equal(nestsWithin(nested(MAX_HTML_DEPTH)), true);
  t.equal(nestsWithin(nested(MAX_HTML_DEPTH + 1)), false);
  t.equal(nestsWithin('<p>a</p>'.repeat(10_000) + '<br>'.repeat(10_000) + '<li>b'.repeat(10_000)), true);
  t.equal(nestsWithin('<b>'.repeat(600)), false, 'unclosed inline elements nest');
  t.equal(nestsWithin('<form>'.repeat(600)), false, 'so do forms in this version of the parser');
});

t.test('nestsWithin answers as the whole parse does, with or without parsing (at most `max` <)', async (t) => {
  const parsed = (html: string, max: number) => {
    const guard = depthGuard(max);
    try {
      new Parser({ onopentagname: guard.open, onclosetag: guard.close }, { decodeEntities: false }).end(html);
      return true;
    } catch {
      return false;
    }
  };
  // Limits near the soups' tag counts, so that both ways are taken.
  const soup = soups((random) => 1 + random(12));
  let unparsed = 0;
  const wrong: string[] = [];
  for (let round = 0; round < 4_000; round++) {
    const html = soup.next();
    const max = 1 + soup.random(8);
    if ((html.match(/</g) ?? []).length <= max) unparsed++;
    if (nestsWithin(html, max) !== parsed(html, max)) wrong.push(`${max}: ${html}`);
  }
  t.same(wrong, []);
  t.ok(unparsed > 500, `${unparsed} soups of at most max '<' (not parsed)`);
  t.equal(nestsWithin('<b><b><b>', 3), true, "three '<' nest three deep at most");
  t.equal(nestsWithin('<b><b><b><b>', 3), false, 'a fourth is one too deep');
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
