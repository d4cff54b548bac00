// mail/uuid.ts: ids in time order (docs/decisions.md #73), RFC 9562 §5.7 UUIDv7.
import t from 'tap';
import { isUuid, timeOrderedUuid } from '../../mail/uuid.js';
import { msOfUuidV7 as msOf, UUID_V7 as V7 } from '../helpers/uuid-v7.js';

t.test('a UUIDv7: version 7, variant 10, the first 48 bits the time in milliseconds', async (t) => {
  const before = Date.now();
  const id = timeOrderedUuid();
  const after = Date.now();
  t.match(id, V7);
  t.ok(isUuid(id));
  t.ok(msOf(id) >= before && msOf(id) <= after, `${msOf(id)} within [${before}, ${after}]`);
});

t.test('made one after another, they sort in that order and never repeat', async (t) => {
  const ids = Array.from({ length: 50_000 }, timeOrderedUuid);
  let ordered = true;
  for (let i = 1; i < ids.length; i++) if (!(ids[i - 1]! < ids[i]!)) ordered = false;
  t.ok(ordered, 'each greater than the one before, as text');
  t.equal(new Set(ids).size, ids.length, 'all distinct');
  t.ok(
    ids.every((id) => V7.test(id)),
    'every one a v7',
  );
  // What is not the time or the counter is random: the last 12 hex digits of a few thousand ids all differ.
  t.equal(new Set(ids.slice(0, 5000).map((id) => id.slice(24))).size, 5000);
});
