// bench/util.ts's figures as every bench reports them: the median of the runs (the mean of the middle two for an even
// count), their range, and the printed form "median (min–max)", with '—' for a figure a run did not give.
import t from 'tap';
import { fixed, median, medianRange, span } from '../../bench/util.js';

t.test('median: the middle value, the mean of the middle two, NaN for none; the input is left as it was', async (t) => {
  const xs = [5, 1, 3];
  t.equal(median(xs), 3);
  t.same(xs, [5, 1, 3], 'not sorted in place');
  t.equal(median([4, 1, 3, 2]), 2.5);
  t.equal(median([7]), 7);
  t.ok(Number.isNaN(median([])));
});

t.test('medianRange: the median with the lowest and the highest', async (t) => {
  t.same(medianRange([2.5, 0.5, 9, 1]), { median: 1.75, min: 0.5, max: 9 });
});

t.test("fixed: the decimals asked for, '—' for undefined, NaN and infinity", async (t) => {
  t.equal(fixed(1.2345, 2), '1.23');
  t.equal(fixed(1860.66), '1861');
  t.equal(fixed(undefined), '—');
  t.equal(fixed(NaN, 2), '—');
  t.equal(fixed(Infinity), '—');
});

t.test('span: "median (min–max)" with the unit after the median', async (t) => {
  t.equal(span({ median: 2.259, min: 2.053, max: 2.346 }, 2), '2.26 (2.05–2.35)');
  t.equal(span(medianRange([1661, 1880, 1861]), 0, ' msg/s'), '1861 msg/s (1661–1880)');
  t.equal(span(medianRange([])), '— (—–—)', 'no runs: no figure');
});
