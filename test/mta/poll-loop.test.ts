// The poll loop's wake (docs/decisions.md #86): a wake polls now, and one that comes while a poll runs is not lost to
// that poll's wait of `pollMs`, which here is an hour, so that only a wake can explain a second poll.
import t from 'tap';
import { pollLoop } from '../../mta/poll-loop.js';
import { systemClock } from '../../mail/clock.js';
import { waitFor } from '../helpers/wait-for.js';

const HOUR = 60 * 60_000;

/** A loop whose polls wait for the test to end them, started: its first poll is running. */
async function controlled() {
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
  loop.schedule(0);
  await waitFor(() => polls === 1, { what: 'the first poll' });
  return {
    loop,
    polls: () => polls,
    /** Ends the poll running now, finding nothing more; with `idle`, waits until no poll runs. */
    async finish(idle = true): Promise<void> {
      pending.shift()!(false);
      if (idle) await waitFor(() => !loop.polling(), { what: 'the poll to end' });
    },
    /** How many polls there were once 50 ms have passed: a poll asked for in that time has begun. */
    async settled(): Promise<number> {
      await new Promise((r) => setTimeout(r, 50));
      return polls;
    },
  };
}

t.test('a wake while idle polls now', async (t) => {
  const { loop, polls, finish, settled } = await controlled();
  t.teardown(() => loop.stop());
  await finish();
  loop.wake();
  loop.wake(); // a second wake before the poll begins is the same poll
  await waitFor(() => polls() === 2, { what: 'the poll the wake asked for' });
  await finish();
  t.equal(await settled(), 2, 'two wakes before it began made one poll');
});

t.test('a wake during a poll polls again once it ends, though the poll found nothing more', async (t) => {
  const { loop, polls, finish, settled } = await controlled();
  t.teardown(() => loop.stop());
  loop.wake();
  t.equal(polls(), 1, 'no second poll while one runs');
  await finish(false); // the next begins at once
  await waitFor(() => polls() === 2, { what: 'the poll after the wake' });
  await finish();
  t.equal(await settled(), 2, 'then it waits its pollMs');
});

t.test('no poll after stop, woken or not', async (t) => {
  const { loop, finish, settled } = await controlled();
  loop.wake();
  loop.stop();
  await finish();
  loop.wake();
  t.equal(await settled(), 1, 'stopped');
});
