// imap/sequence-set.ts: parsing RFC 3501 §9 sequence sets, resolving them against a message count and
// against UIDs, and compressing UID lists for COPYUID / APPENDUID (RFC 4315 §3).
import t from 'tap';
import {
  formatSequenceSet,
  parseSequenceSet,
  resolveSequenceNumbers,
  resolveUids,
  sequenceSetHas,
} from '../../imap/sequence-set.js';

t.test('parse', async (t) => {
  t.same(parseSequenceSet('1:*'), [{ from: 1, to: '*' }]);
  t.same(parseSequenceSet('2,4:7,9,12:*'), [
    { from: 2, to: 2 },
    { from: 4, to: 7 },
    { from: 9, to: 9 },
    { from: 12, to: '*' },
  ]);
  t.same(parseSequenceSet('*'), [{ from: '*', to: '*' }]);
  t.same(parseSequenceSet('*:4'), [{ from: '*', to: 4 }]);
  t.same(parseSequenceSet('4294967295'), [{ from: 4294967295, to: 4294967295 }]);
  for (const bad of ['', '0', '1:0', '01', '1,', ',1', '1::2', 'a', '1:2:3', '4294967296', '-1', '1 2', '$']) {
    t.equal(parseSequenceSet(bad), null, JSON.stringify(bad));
  }
});

t.test('sequence numbers against a message count', async (t) => {
  const set = (s: string) => parseSequenceSet(s) ?? t.fail(s);
  t.same(resolveSequenceNumbers(set('1:*') as never, 5), { ok: true, ranges: [[1, 5]] });
  // RFC 3501 §9: "4:2" is "2:4"; overlapping and adjacent ranges merge.
  t.same(resolveSequenceNumbers(set('4:2,3,5,9:8') as never, 10), {
    ok: true,
    ranges: [
      [2, 5],
      [8, 9],
    ],
  });
  t.same(resolveSequenceNumbers(set('*') as never, 7), { ok: true, ranges: [[7, 7]] });
  t.equal(resolveSequenceNumbers(set('6') as never, 5).ok, false, 'beyond the last message');
  t.equal(resolveSequenceNumbers(set('1:*') as never, 0).ok, false, 'an empty mailbox');
});

t.test('UIDs against the UIDs in use (RFC 3501 §6.4.8)', async (t) => {
  const uids = [3, 4, 10, 11, 12, 40];
  const r = (s: string) => resolveUids(parseSequenceSet(s) ?? [], uids);
  t.same(r('1:*'), uids);
  t.same(r('4:11'), [4, 10, 11]);
  t.same(r('11:4'), [4, 10, 11]);
  t.same(r('5:9'), [], 'UIDs not in use are ignored');
  t.same(r('*'), [40]);
  t.same(r('100:*'), [40], '"*" is the largest UID in use, so 100:* names the last message');
  t.same(r('12,3,12,40:39'), [3, 12, 40], 'ascending, each once');
  t.same(resolveUids(parseSequenceSet('1:*') ?? [], []), []);
  t.equal(sequenceSetHas(parseSequenceSet('2,5:*') ?? [], 7, 9), true);
  t.equal(sequenceSetHas(parseSequenceSet('2,5:*') ?? [], 3, 9), false);
});

t.test('compression keeps the order COPYUID pairs rely on (RFC 4315 §3)', async (t) => {
  t.equal(formatSequenceSet([1, 2, 3, 7, 5, 6]), '1:3,7,5:6');
  t.equal(formatSequenceSet([304, 319, 320]), '304,319:320');
  t.equal(formatSequenceSet([3956, 3957, 3958]), '3956:3958');
  t.equal(formatSequenceSet([9]), '9');
  t.equal(formatSequenceSet([]), '');
  t.equal(formatSequenceSet([5, 4, 3]), '5,4,3', 'descending runs are not ranges: "5:3" would mean 3,4,5');
});
