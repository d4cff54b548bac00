// imap/fetch-sections.ts: BODY[section]<partial> (RFC 3501 §6.4.5) over the served form of a message —
// the receipt prefix, then the stored body — with expected bytes cut from the fixtures by searching
// their text, not from the MIME tree's offsets.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseMimeTree } from '../../mail/mime-tree.js';
import { clipPartial, filterHeaderFields, planSection } from '../../imap/fetch-sections.js';
import { sectionBytes } from '../../imap/fetch-sections.js';
import type { Section, SectionText } from '../../imap/command-types.js';

const DIR = fileURLToPath(new URL('../fixtures/mime/', import.meta.url));
const PREFIX =
  'Return-Path: <bob@example.com>\r\nReceived: from mx.example.com by us; Fri, 7 Jun 2024 10:00:01 +0100\r\n';

function served(name: string, prefix = PREFIX) {
  const blob = readFileSync(DIR + name);
  const tree = parseMimeTree(blob);
  const full = Buffer.concat([Buffer.from(prefix), blob]);
  const get = (
    part: number[],
    text: SectionText | null = null,
    fields: string[] | null = null,
    partial: { offset: number; length: number } | null = null,
  ): string | null => {
    const section: Section = { part, text, fields };
    const plan = planSection(tree, prefix.length, section, partial);
    if (!plan) return null;
    t.ok(plan.start >= 0 && plan.start <= plan.end && plan.end <= full.length, 'the plan stays inside the message');
    // Read exactly the planned range, as the handler does, at its offset.
    return sectionBytes(plan, full.subarray(plan.start, plan.end), plan.start).toString('latin1');
  };
  return { text: full.toString('latin1'), get, tree, prefix };
}

/** The text between the first `from` at or after `after` and the next `to` after it. */
function between(s: string, from: string, to: string, after = 0): string {
  const a = s.indexOf(from, after);
  const b = s.indexOf(to, a + from.length);
  if (a < 0 || b < 0) throw new Error(`${from}…${to} not found`);
  return s.slice(a, b);
}

t.test('the whole message, its header and text: the prefix belongs to the top-level header', async (t) => {
  const m = served('nested-rfc822.eml');
  t.equal(m.get([]), m.text, 'BODY[] = prefix + stored body');
  const headerEnd = m.text.indexOf('\r\n\r\n') + 4;
  t.equal(m.get([], 'HEADER'), m.text.slice(0, headerEnd));
  t.ok(m.get([], 'HEADER')!.startsWith('Return-Path: <bob@example.com>\r\nReceived: '));
  t.equal(m.get([], 'TEXT'), m.text.slice(headerEnd));
  t.ok(m.get([], 'TEXT')!.startsWith('preamble text\r\n--outer'));
  const bare = served('nested-rfc822.eml', '');
  t.equal(bare.get([], 'HEADER'), bare.text.slice(0, bare.text.indexOf('\r\n\r\n') + 4), 'no prefix at all');
});

t.test('numeric parts, MIME headers and message/rfc822 sub-sections', async (t) => {
  const m = served('nested-rfc822.eml');
  t.equal(m.get([1]), 'See below.');
  t.equal(m.get([1], 'MIME'), 'Content-Type: text/plain\r\n\r\n');
  const inner = between(m.text, 'From: news@shop.example', '\r\n--outer\r\n');
  t.equal(m.get([2]), inner, 'BODY[2] is the whole encapsulated message');
  t.equal(
    m.get([2], 'MIME'),
    'Content-Type: message/rfc822\r\nContent-Disposition: attachment; filename="offers.eml"\r\n\r\n',
  );
  t.equal(m.get([2], 'HEADER'), inner.slice(0, inner.indexOf('\r\n\r\n') + 4));
  t.equal(m.get([2], 'TEXT'), inner.slice(inner.indexOf('\r\n\r\n') + 4));
  t.equal(m.get([2, 1]), 'Plain offers');
  t.equal(m.get([2, 2]), '<b>HTML offers</b>');
  t.equal(m.get([2, 2], 'MIME'), 'Content-Type: text/html; charset=utf-8\r\n\r\n');
  t.equal(m.get([3, 1]), 'Just text.', 'the body of a single-part message inside part 3 is 3.1');
  t.equal(m.get([3], 'HEADER'), 'Subject: single part inside\r\n\r\n');
  t.equal(m.get([3], 'TEXT'), 'Just text.');
  t.equal(m.get([9]), null, 'no part 9');
  t.equal(m.get([1, 1]), null, 'a text part has no sub-parts');
  t.equal(m.get([1], 'HEADER'), null, 'HEADER after a part number needs message/rfc822');
  t.equal(m.get([1], 'TEXT'), null);
  const single = served('simple.eml');
  t.equal(single.get([1]), single.text.slice(single.text.indexOf('\r\n\r\n') + 4), 'a single part is part 1');
  t.equal(single.get([2]), null);
});

t.test('HEADER.FIELDS and HEADER.FIELDS.NOT: any case, folded lines, the prefix fields', async (t) => {
  const m = served('simple.eml');
  t.equal(
    m.get([], 'HEADER.FIELDS', ['subject', 'FROM']),
    'From: Alice Example <alice@example.org>\r\nSubject: Lunch\r\n on Thursday?\r\n\r\n',
    'message order, continuation lines kept, the blank line after',
  );
  t.equal(m.get([], 'HEADER.FIELDS', ['X-Absent']), '\r\n', 'nothing matches: the blank line alone');
  t.equal(
    m.get([], 'HEADER.FIELDS', ['received']),
    'Received: from mx.example.com by us; Fri, 7 Jun 2024 10:00:01 +0100\r\n\r\n',
    'the prefix lines are fields of the top-level header',
  );
  const not = m.get([], 'HEADER.FIELDS.NOT', ['Received', 'return-path', 'SUBJECT', 'mime-version', 'content-type']);
  t.equal(
    not,
    'Date: Tue, 4 Jun 2024 09:30:00 +0200 (CEST)\r\nFrom: Alice Example <alice@example.org>\r\n' +
      'To: bob@example.com, "Carol, Q." <carol@example.net>\r\nMessage-ID: <lunch-1@example.org>\r\n' +
      'In-Reply-To: <plan-7@example.com>\r\n\r\n',
    'the stored body repeats Return-Path: both copies go',
  );
  const nested = served('nested-rfc822.eml');
  t.equal(nested.get([2], 'HEADER.FIELDS', ['Subject']), 'Subject: =?utf-8?q?Caf=C3=A9?= Offers\r\n\r\n');
  t.equal(nested.get([1], 'HEADER.FIELDS', ['Subject']), null);
  t.equal(
    nested.get([], 'HEADER.FIELDS', ['subject'], { offset: 9, length: 5 }),
    'Fwd: ',
    'a partial applies after filtering',
  );
});

t.test('filterHeaderFields on its own: bare LF, a last line without a break, junk lines', async (t) => {
  const h = Buffer.from('From x Tue\nSubject: a\n\tb\nX-A: 1\nno colon here\nx-a: 2');
  t.equal(filterHeaderFields(h, ['X-A'], false).toString(), 'X-A: 1\nx-a: 2\r\n\r\n');
  t.equal(filterHeaderFields(h, ['x-a'], true).toString(), 'Subject: a\n\tb\n\r\n');
  t.equal(
    filterHeaderFields(Buffer.from('A: 1\r\n\r\nB: 2\r\n'), ['b'], false).toString(),
    '\r\n',
    'stops at the blank line',
  );
});

t.test('partials: <origin.octets> clips, past the end is empty, and narrows the read', async (t) => {
  const m = served('simple.eml');
  t.equal(m.get([], null, null, { offset: 0, length: 12 }), 'Return-Path:');
  t.equal(m.get([1], null, null, { offset: 3, length: 4 }), 'Bob,');
  t.equal(m.get([1], null, null, { offset: 53, length: 1000 }), 'Alice\r\n', 'clipped at the end of the part');
  t.equal(m.get([1], null, null, { offset: 60, length: 10 }), '', 'origin at the end: empty');
  t.equal(m.get([1], null, null, { offset: 4000, length: 10 }), '', 'origin past the end: empty');
  const plan = planSection(m.tree, m.prefix.length, { part: [1], text: null, fields: null }, { offset: 3, length: 4 });
  t.equal(plan!.end - plan!.start, 4, 'only the four octets are read');
  t.same(clipPartial(Buffer.from('abc'), { offset: 1, length: 1 }), Buffer.from('b'));
});
