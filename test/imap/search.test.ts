// imap/parse-search.ts: every RFC 3501 §6.4.4 search key, CONDSTORE's MODSEQ (RFC 7162 §3.1.5),
// nesting, CHARSET, and the keys that must be refused.
import t from 'tap';
import { parse, parseFailure } from './parse-helpers.js';
import type { SearchKey } from '../../imap/command-types.js';

const criteria = (wire: string): SearchKey => (parse(`a SEARCH ${wire}`).command as { criteria: SearchKey }).criteria;
const date = (year: number, month: number, day: number) => ({ year, month, day });

t.test('every RFC 3501 §6.4.4 key', async (t) => {
  const flagKeys = ['ALL', 'ANSWERED', 'DELETED', 'DRAFT', 'FLAGGED', 'NEW', 'OLD', 'RECENT', 'SEEN'];
  const unKeys = ['UNANSWERED', 'UNDELETED', 'UNDRAFT', 'UNFLAGGED', 'UNSEEN'];
  for (const key of [...flagKeys, ...unKeys]) {
    t.same(criteria(key), { key }, key);
    t.same(criteria(key.toLowerCase()), { key }, `${key} in lower case`);
  }
  for (const key of ['BCC', 'BODY', 'CC', 'FROM', 'SUBJECT', 'TEXT', 'TO']) {
    t.same(criteria(`${key} "a b"`), { key, value: 'a b' }, key);
    t.same(criteria(`${key} atom`), { key, value: 'atom' }, `${key} with an atom`);
  }
  for (const key of ['BEFORE', 'ON', 'SINCE', 'SENTBEFORE', 'SENTON', 'SENTSINCE']) {
    t.same(criteria(`${key} 1-Feb-1994`), { key, date: date(1994, 2, 1) }, key);
    t.same(criteria(`${key} "29-feb-2024"`), { key, date: date(2024, 2, 29) }, `${key} quoted`);
  }
  t.same(criteria('KEYWORD $Forwarded'), { key: 'KEYWORD', flag: '$Forwarded' });
  t.same(criteria('UNKEYWORD Junk'), { key: 'UNKEYWORD', flag: 'Junk' });
  t.same(criteria('HEADER Message-ID "<x@y>"'), { key: 'HEADER', field: 'Message-ID', value: '<x@y>' });
  t.same(criteria('HEADER X-Empty ""'), { key: 'HEADER', field: 'X-Empty', value: '' });
  t.same(criteria('LARGER 1024'), { key: 'LARGER', size: 1024 });
  t.same(criteria('SMALLER 0'), { key: 'SMALLER', size: 0 });
  t.same(criteria('UID 2,4:*'), {
    key: 'UID',
    set: [
      { from: 2, to: 2 },
      { from: 4, to: '*' },
    ],
  });
  t.same(criteria('1:3'), { key: 'SEQ', set: [{ from: 1, to: 3 }] });
  t.same(criteria('*'), { key: 'SEQ', set: [{ from: '*', to: '*' }] });
  t.same(criteria('NOT SEEN'), { key: 'NOT', operand: { key: 'SEEN' } });
  t.same(criteria('OR SEEN FLAGGED'), { key: 'OR', left: { key: 'SEEN' }, right: { key: 'FLAGGED' } });
});

t.test('CONDSTORE MODSEQ (RFC 7162 §3.1.5)', async (t) => {
  t.same(criteria('MODSEQ 620162338'), { key: 'MODSEQ', modseq: 620162338n, entry: null });
  t.same(criteria('MODSEQ "/flags/\\\\draft" all 620162338'), {
    key: 'MODSEQ',
    modseq: 620162338n,
    entry: { name: '/flags/\\draft', type: 'all' },
  });
  t.match(parseFailure('a SEARCH MODSEQ "/flags/x" mine 5').message, /priv, shared or all/);
});

t.test('nesting: lists, OR of lists, NOT of OR', async (t) => {
  t.same(criteria('OR (FROM a SEEN) NOT (TO b)'), {
    key: 'OR',
    left: { key: 'AND', operands: [{ key: 'FROM', value: 'a' }, { key: 'SEEN' }] },
    right: { key: 'NOT', operand: { key: 'TO', value: 'b' } },
  });
  t.same(criteria('NOT OR 1:2 UID 5'), {
    key: 'NOT',
    operand: {
      key: 'OR',
      left: { key: 'SEQ', set: [{ from: 1, to: 2 }] },
      right: { key: 'UID', set: [{ from: 5, to: 5 }] },
    },
  });
  t.same(criteria('((SEEN))'), { key: 'SEEN' });
  t.same(criteria('DELETED (1,3 UNSEEN)'), {
    key: 'AND',
    operands: [
      { key: 'DELETED' },
      {
        key: 'AND',
        operands: [
          {
            key: 'SEQ',
            set: [
              { from: 1, to: 1 },
              { from: 3, to: 3 },
            ],
          },
          { key: 'UNSEEN' },
        ],
      },
    ],
  });
  t.match(parseFailure(`a SEARCH ${'NOT '.repeat(150)}SEEN`).message, /nested too deeply/);
  t.match(parseFailure(`a SEARCH ${'('.repeat(150)}SEEN${')'.repeat(150)}`).message, /nested too deeply/);
});

t.test('CHARSET: US-ASCII and UTF-8; others are NO [BADCHARSET] (RFC 3501 §6.4.4)', async (t) => {
  const cmd = parse('a SEARCH CHARSET utf-8 SUBJECT {5+}\r\nkäse').command;
  t.same(cmd, { name: 'SEARCH', charset: 'UTF-8', criteria: { key: 'SUBJECT', value: 'käse' } });
  t.equal((parse('a UID SEARCH CHARSET US-ASCII ALL').command as { charset: string }).charset, 'US-ASCII');
  const e = parseFailure('a SEARCH CHARSET KOI8-R TEXT x');
  t.equal(e.tag, 'a');
  t.equal(e.error.status, 'NO');
  t.same(e.error.code, { code: 'BADCHARSET', charsets: ['US-ASCII', 'UTF-8'] });
});

t.test('keys that do not parse', async (t) => {
  for (const bad of [
    '',
    'FROBNICATE',
    'SINCE 30-Feb-2024',
    'SINCE 1-Foo-2024',
    'SINCE 2024-01-01',
    'LARGER x',
    'LARGER 4294967296',
    'FROM',
    'HEADER Subject',
    'OR SEEN',
    'NOT',
    '(SEEN',
    'SEEN)',
    'UID x',
    '0:3',
    'KEYWORD (x)',
    'RETURN (MIN) ALL',
  ]) {
    const e = parseFailure(`t SEARCH ${bad}`.trimEnd());
    t.equal(e.tag, 't', bad);
    t.equal(e.error.status, 'BAD', bad);
  }
});
