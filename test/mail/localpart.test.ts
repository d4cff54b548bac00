// mail/localpart.ts: inbox local parts are RFC 5321 §4.1.2 Dot-strings of at most 64 octets.
import t from 'tap';
import { isValidLocalpart, localpartProblem, normalizeLocalpart } from '../../mail/localpart.js';

t.test('accepts Dot-strings of atext', async (t) => {
  for (const ok of ['info', 'first.last', 'a', "o'brien", 'x+tag', "!#$%&'*+-/=?^_`{|}~", 'A.B.C', 'a'.repeat(64)])
    t.ok(isValidLocalpart(ok), ok);
});

t.test('refuses every other shape, naming why', async (t) => {
  const cases: [string, string][] = [
    ['', 'empty'],
    ['.info', 'not_dot_string'],
    ['info.', 'not_dot_string'],
    ['.', 'not_dot_string'],
    ['first..last', 'not_dot_string'],
    ['first last', 'not_dot_string'],
    [' info', 'not_dot_string'],
    ['info\t', 'not_dot_string'],
    ['a@b', 'not_dot_string'],
    ['"quoted"', 'not_dot_string'],
    ['"john doe"', 'not_dot_string'],
    ['a"b', 'not_dot_string'],
    ['back\\slash', 'not_dot_string'],
    ['semi;colon', 'not_dot_string'],
    ['com,ma', 'not_dot_string'],
    ['(comment)x', 'not_dot_string'],
    ['<x>', 'not_dot_string'],
    ['line\nbreak', 'not_dot_string'],
    ['nul\u0000', 'not_dot_string'],
    ['del\u007f', 'not_dot_string'],
    ['bell\u0007', 'not_dot_string'],
    ['jürgen', 'not_dot_string'],
    ['用户', 'not_dot_string'],
    ['a'.repeat(65), 'too_long'],
    ['a.'.repeat(32) + 'b', 'too_long'],
  ];
  for (const [input, why] of cases) t.equal(localpartProblem(input), why, JSON.stringify(input));
  t.equal(localpartProblem(undefined as unknown as string), 'empty', 'not a string');
});

t.test('64 octets is the limit, counted after the dots', async (t) => {
  t.ok(isValidLocalpart('a.'.repeat(31) + 'bc'), '64 with dots');
  t.notOk(isValidLocalpart('a.'.repeat(31) + 'bcd'), '65 with dots');
});

t.test('normalises to lower case for comparisons', async (t) => {
  t.equal(normalizeLocalpart('Info.Desk'), 'info.desk');
  t.equal(normalizeLocalpart('info.desk'), normalizeLocalpart('INFO.DESK'));
  t.equal(normalizeLocalpart('bad..one'), null);
});
