// mail/text-pieces.ts: the composer's list of a message's pieces, kept in arrays of a bounded size, against a plain
// array doing the same pushes and truncations.
import t from 'tap';
import { PieceList } from '../../mail/text-pieces.js';
import { seeded } from '../helpers/seeded.js';

t.test('PieceList holds what an array holds through pushes and truncations across its segments', async (t) => {
  const rnd = seeded(5);
  const list = new PieceList();
  const array: string[] = [];
  let mismatches = 0;
  const check = (what: string) => {
    const joined = list
      .segments()
      .map((s) => s.join(''))
      .join('');
    const same =
      list.length === array.length &&
      joined === array.join('') &&
      list.segments().every((s) => s.length <= 8192) &&
      [0, array.length >> 1, array.length - 1].every((i) => i < 0 || list.at(i) === array[i]);
    if (!same && mismatches++ < 3) t.fail(`differs after ${what} (${list.length} against ${array.length})`);
  };
  for (let step = 0; step < 400; step++) {
    // Pushes of one or two pieces, up to some thousands: the list crosses several segments of 8,192.
    for (let n = Math.floor(rnd() * 2000); n > 0; n--) {
      const a = String(Math.floor(rnd() * 1e6));
      if (rnd() < 0.5) {
        list.push(a);
        array.push(a);
      } else {
        list.push(a, '\r\n');
        array.push(a, '\r\n');
      }
    }
    check(`pushes at step ${step}`);
    // Now and then dropped back to an earlier length (what wrapCrlfText does with a text it cannot take).
    if (rnd() < 0.3) {
      const to = Math.floor(rnd() * (array.length + 1));
      list.length = to;
      array.length = to;
      check(`truncation to ${to}`);
    }
    const from = Math.floor(rnd() * (array.length + 1));
    const marked = `x${step}`;
    if (list.someFrom(from, (s) => s === marked) !== false) mismatches++;
  }
  t.equal(mismatches, 0, '400 steps');
  t.ok(list.segments().length > 2, `${list.segments().length} segments at the end`);
  list.push('needle');
  t.equal(
    list.someFrom(list.length - 1, (s) => s === 'needle'),
    true,
    'someFrom finds a piece at its start',
  );
  t.equal(
    list.someFrom(list.length, (s) => s === 'needle'),
    false,
    'and nothing past the end',
  );
});
