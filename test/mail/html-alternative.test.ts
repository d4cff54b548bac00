// mail/html-alternative.ts: the text alternative of an html-only send, element by element, its wrapping, and its
// bounds on html made to cost (nesting, long words, margins).
import t from 'tap';
import { TEXT_WIDTH, textAlternative } from '../../mail/html-alternative.js';
import { MAX_HTML_DEPTH } from '../../mail/html-nesting.js';

const words = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt. ';

t.test('paragraphs apart, blocks on lines of their own, inline elements in the flow of words', async (t) => {
  t.equal(textAlternative('<p>Hi <b>there</b></p><p>Second</p>'), 'Hi there\n\nSecond');
  t.equal(textAlternative('<div>one</div><div>two</div>'), 'one\ntwo');
  t.equal(textAlternative('Hel<b>lo</b> wor<i>ld</i>!'), 'Hello world!', 'a word in pieces stays one word');
  t.equal(textAlternative('  lots   of\n\tspace\u200b here&nbsp;too  '), 'lots of space here too');
  t.equal(textAlternative('<p>Fish &amp; chips &lt;3 &#x2764;</p>'), 'Fish & chips <3 \u2764', 'references decoded');
  t.equal(textAlternative(''), '');
  t.equal(textAlternative('<p></p><div> </div>'), '');
});

t.test('headings in capitals with their space, links not', async (t) => {
  t.equal(textAlternative('<p>a</p><h1>Title</h1><p>b</p>'), 'a\n\n\nTITLE\n\nb', 'h1-h3: two empty lines before');
  t.equal(textAlternative('<p>a</p><h4>Small</h4><p>b</p>'), 'a\n\nSMALL\n\nb', 'h4-h6: one');
  t.equal(textAlternative('<h2>Order <a href="https://s.test/o?a=B">#1</a></h2>'), 'ORDER #1 [https://s.test/o?a=B]');
});

t.test(
  'links: text [address], an image link by its alt, the address alone without either, once when the same',
  async (t) => {
    t.equal(textAlternative('<a href="https://x.test/a">docs</a>.'), 'docs [https://x.test/a].');
    t.equal(textAlternative('<a href="https://x.test/logo"><img src="logo.png"></a>'), 'https://x.test/logo');
    t.equal(textAlternative('<a href="https://x.test/shop"><img alt=" Shop "></a>'), 'Shop [https://x.test/shop]');
    t.equal(
      textAlternative('<a href="https://x.test/">Go <img alt="arrow"></a>'),
      'Go [https://x.test/]',
      'words first',
    );
    t.equal(textAlternative('<p><img alt="decoration">text</p>'), 'text', 'an image outside a link: no reading');
    t.equal(textAlternative('<a href="https://x.test/">https://x.test/</a>'), 'https://x.test/');
    t.equal(textAlternative('<a href="mailto:help@x.test">help@x.test</a>'), 'help@x.test', 'mailto: dropped');
    t.equal(textAlternative('<a href="mailto:help@x.test">Write</a>'), 'Write [help@x.test]');
    t.equal(textAlternative('<a href="#top">Top</a> <a>plain</a> <a href=" ">blank</a>'), 'Top plain blank');
    t.equal(textAlternative('<a href="https://x.test/?a=1&amp;b=2">q</a>'), 'q [https://x.test/?a=1&b=2]');
  },
);

t.test('lists: marks, numbers from `start` in the `type` asked, nested items under their mark', async (t) => {
  t.equal(textAlternative('<p>x</p><ul><li>one</li><li>two</li></ul><p>y</p>'), 'x\n\n * one\n * two\n\ny');
  t.equal(textAlternative('<ol start="9"><li>nine</li><li>ten</li></ol>'), ' 9. nine\n 10. ten');
  t.equal(textAlternative('<ol type="a"><li>a</li><li>b</li></ol>'), ' a. a\n b. b');
  t.equal(textAlternative('<ol start="0"><li>z</li></ol><ol start="x"><li>o</li></ol>'), ' 0. z\n\n 1. o');
  t.equal(textAlternative('<ol type="I" start="4"><li>x</li><li>y</li></ol>'), ' IV. x\n V. y');
  t.equal(
    textAlternative('<ul><li>one<ul><li>sub a</li><li>sub b</li></ul></li><li>two</li></ul>'),
    ' * one\n   * sub a\n   * sub b\n * two',
  );
  const item = textAlternative(`<ul><li>${words.repeat(2)}</li></ul>`).split('\n');
  t.ok(item.length > 1, 'a long item is wrapped');
  t.match(item[0], /^ \* Lorem/);
  for (const line of item.slice(1)) t.match(line, /^ {3}\S/, 'its later lines under its words');
});

t.test('quotes, preformatted text, breaks, rules and tables', async (t) => {
  t.equal(
    textAlternative('<blockquote><p>one</p><p>two</p><blockquote>deeper</blockquote></blockquote>after'),
    '> one\n>\n> two\n>\n> > deeper\n\nafter',
  );
  t.equal(textAlternative('<pre>\n  keep   this\n\n    as is</pre>next'), '  keep   this\n\n    as is\n\nnext');
  t.equal(textAlternative('a<br>b<br><br>c'), 'a\nb\n\nc');
  t.equal(textAlternative('<br><br>a<br><br>'), 'a', 'no empty line first or last');
  t.equal(textAlternative('a<hr>b'), `a\n\n${'-'.repeat(TEXT_WIDTH)}\n\nb`);
  t.equal(textAlternative('<table><tr><td>x</td><td>y</td></tr><tr><th>z</th></tr></table>'), 'x y\nz');
});

t.test('what no reader sees is left out: the head, scripts, styles, images and hidden elements', async (t) => {
  const html =
    '<html><head><title>T</title><style>p { color: red }</style></head><body>' +
    '<div style="display:none;max-height:0">preheader&zwnj;&nbsp;&zwnj;</div><span hidden>gone</span>' +
    '<script>alert(1)</script><img src="x.png" alt="pic"><svg><text>vector</text></svg>' +
    '<p style="color: red; display: block">shown</p><div style="DISPLAY : NONE !important">also gone</div>' +
    '</body></html>';
  t.equal(textAlternative(html), 'shown');
});

t.test('lines of at most 76, broken between words; a word longer than a line stands alone', async (t) => {
  const text = textAlternative(`<p>${words.repeat(6)}</p>`);
  const lines = text.split('\n');
  t.ok(lines.length >= 7);
  t.ok(Math.max(...lines.map((l) => l.length)) <= TEXT_WIDTH, 'none over the width');
  t.equal(lines.join(' '), words.repeat(6).trim(), 'no word split or lost');
  // Greedy: each line takes every word that fits.
  for (let i = 0; i + 1 < lines.length; i++) t.ok(lines[i]!.length + 1 + lines[i + 1]!.split(' ')[0]!.length > 76);
  const url = `https://x.test/${'a'.repeat(100)}`;
  t.equal(textAlternative(`<p>see ${url} now</p>`), `see\n${url}\nnow`);
  t.equal(textAlternative(`<p>${'b'.repeat(90)}</p>`), 'b'.repeat(90));
});

/** xorshift32 from a fixed seed: the same soups every run. */
function random(seed: number) {
  return (n: number) => {
    seed ^= seed << 13;
    seed ^= seed >>> 17;
    seed ^= seed << 5;
    return (seed >>> 0) % n;
  };
}

// Any html: no space at a line's end, no line over the width but a word of its own, and every word of the text in
// order (the marks of lists and quotes aside).
t.test('random tag soups keep their words in order within the width', async (t) => {
  const tags = ['p', '/p', 'div', '/div', 'b', '/b', 'br', 'ul', 'ol', 'li', '/li', '/ul', 'blockquote'];
  const more = ['/blockquote', 'table', 'tr', 'td', '/td', '/tr', '/table', 'span', '/span', 'h5', '/h5'];
  const all = [...tags, ...more];
  const r = random(0x2545f491);
  const wrong: string[] = [];
  for (let round = 0; round < 500; round++) {
    const wordsIn: string[] = [];
    let html = '';
    for (let i = 0, n = 1 + r(80); i < n; i++) {
      if (r(3) === 0) html += `<${all[r(all.length)]}>`;
      const word = `w${r(1000)}`;
      wordsIn.push(word);
      html += r(4) === 0 ? word : ` ${word} `;
    }
    const out = textAlternative(html);
    const lines = out.split('\n');
    if (lines.some((l) => l !== l.trimEnd())) wrong.push(`space at a line's end: ${html}`);
    if (lines.some((l) => l.length > TEXT_WIDTH && / \S+ /.test(l.replace(/^[\s>*0-9a-z.]*/i, ''))))
      wrong.push(`over the width: ${html}`);
    // Words that met without a space are one word in the text: compare the letters in order.
    const wordsOut = out.split(/\s+/).filter((w) => !/^(\*|>+|[0-9a-z]+\.)$/i.test(w));
    if (wordsOut.join('').toLowerCase() !== wordsIn.join('')) wrong.push(`words: ${html}\n${out}`);
  }
  t.same(wrong, []);
});

t.test(
  'html nested past MAX_HTML_DEPTH gets the plainer text, its parse stopped there',
  { timeout: 30_000 },
  async (t) => {
    const nested = (n: number) => `${'<div>'.repeat(n)}<h1>Deep</h1>${'</div>'.repeat(n)}`;
    t.equal(textAlternative(nested(MAX_HTML_DEPTH - 1)), 'DEEP', 'within the depth: formatted');
    t.equal(textAlternative(nested(MAX_HTML_DEPTH + 1)), 'Deep', 'past it: the words alone');
    // 200,000 deep would cost the parser minutes (the square of the depth); stopped, a moment. The timeout judges.
    t.equal(textAlternative(nested(200_000)), 'Deep');
    t.equal(textAlternative('<span>'.repeat(200_000) + 'x'), 'x');
  },
);

// Html made to cost: work and text that grow with its length, not faster. Timeouts judge the time (a square of
// a million would be hours), lengths the size.
t.test(
  'a word of a million pieces, margins deeper than are drawn, html made to grow',
  { timeout: 30_000 },
  async (t) => {
    t.equal(textAlternative('<i>a</i>'.repeat(1_000_000)), 'a'.repeat(1_000_000));
    const quoted = (n: number) => `${'<blockquote>'.repeat(n)}${'Lorem ipsum dolor sit amet.<br>'.repeat(10_000)}`;
    const text = textAlternative(quoted(20));
    t.equal(text.split('\n')[0], `${'> '.repeat(8)}Lorem ipsum dolor sit amet.`, 'eight margins drawn, the rest not');
    t.equal(text.split('\n').length, 10_000);
    // An octet or four of html for a line of eight or sixteen of margin: past three times the html, its words alone.
    for (const html of [
      `${'<blockquote>'.repeat(20)}${'x<br>'.repeat(50_000)}`,
      `${'<blockquote>'.repeat(20)}<pre>${'\n'.repeat(100_000)}</pre>`,
    ]) {
      const grown = textAlternative(`<h1>t</h1>${html}`);
      t.ok(grown.length <= html.length * 3 + 1024, `a text of ${grown.length} for html of ${html.length}`);
      t.match(grown, /^t(\n|$)/, 'the plainer text (no capitals)');
    }
  },
);
