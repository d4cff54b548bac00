// The poll loop's wake (docs/decisions.md #86): a wake polls now, and one that comes while a poll runs is not lost to
// that poll's wait of `pollMs`, which here is an hour, so that only a wake can explain a second poll.
import t from 'tap';
import { pollLoop } from '../../mta/poll-loop.js';
import { systemClock } from '../../mail/clock.js';
import { waitFor } from '../helpers/wait-for.js';

const HOUR = 60 * 60_000;

/** A loop whose polls wait for the test to end them: each poll's `finish` is in `pending`. */
function controlled() {
  const pending: ((more: boolean) => void)[] = [];
  let polls = 0;
  const loop = pollLoop(
    () => {
      polls++;
      return new Promise<boolean>((resolve) => pending.push(resolve));
    },
    HOUR,
    systemClock,
  );
  return { loop, pending, polls: () => polls };
}

t.test('a wake while idle polls now', async (t) => {
  const { loop, pending, polls } = controlled();
  t.teardown(() => loop.stop());
  loop.schedule(0);
  await waitFor(() => polls() === 1, { what: 'the first poll' });
  pending.shift()!(false);
  await waitFor(() => !loop.polling(), { what: 'the first poll to end' });
  loop.wake();
  loop.wake(); // a second wake before the poll begins is the same poll
  await waitFor(() => polls() === 2, { what: 'the poll the wake asked for' });
  pending.shift()!(false);
  await waitFor(() => !loop.polling(), { what: 'the second poll to end' });
  await new Promise((r) => setTimeout(r, 50));
  t.equal(polls(), 2, 'two wakes before it began made one poll');
});

t.test('a wake during a poll polls again once it ends, though the poll found nothing more', async (t) => {
  const { loop, pending, polls } = controlled();
  t.teardown(() => loop.stop());
  loop.schedule(0);
  await waitFor(() => polls() === 1, { what: 'the first poll' });
  loop.wake();
  t.equal(polls(), 1, 'no second poll while one runs');
  pending.shift()!(false);
  await waitFor(() => polls() === 2, { what: 'the poll after the wake' });
  pending.shift()!(false);
  await waitFor(() => !loop.polling(), { what: 'the second poll to end' });
  await new Promise((r) => setTimeout(r, 50));
  t.equal(polls(), 2, 'then it waits its pollMs');
});

t.test('no poll after stop, woken or not', async (t) => {
  const { loop, pending, polls } = controlled();
  loop.schedule(0);
  await waitFor(() => polls() === 1, { what: 'the first poll' });
  loop.wake();
  loop.stop();
  pending.shift()!(false);
  loop.wake();
  await new Promise((r) => setTimeout(r, 50));
  t.equal(polls(), 1, 'stopped');
});
