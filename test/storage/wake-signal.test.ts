// storage/wake-signal.ts: a wake that no listener of its own signal hears touches the signal's file, and the listeners
// of every other signal on that file hear it through the kernel (inotify); one that a listener hears touches nothing.
// Two signals on one file here stand for two processes on one data directory (test/mta/wake-across-processes.test.ts
// has the processes).
import t, { type Test } from 'tap';
import { stat, utimes, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { wakeSignal } from '../../storage/wake-signal.js';
import { tempDir } from '../helpers/child.js';
import { waitFor } from '../helpers/wait-for.js';

const wakeFile = async (t: Test) => path.join(await tempDir(t), 'wake', 'spool');

/** The file's times set to 2001: a touch (which sets them to now) shows in its mtime. */
const OLD = new Date('2001-01-01T00:00:00Z');
const mtime = async (file: string) => (await stat(file)).mtimeMs;

t.test('a wake with no listener of its own reaches the listeners on the same file', async (t) => {
  const file = await wakeFile(t);
  const control = wakeSignal(file);
  const mta = wakeSignal(file);
  t.ok((await stat(file)).isFile(), 'the file and its folder are made');
  // Set before the watch begins, which would hear it as a touch.
  await utimes(file, OLD, OLD);
  let heard = 0;
  const stop = mta.onWake(() => heard++);
  control.wake();
  await waitFor(() => heard > 0, { what: 'the other signal hearing the wake' });
  t.ok((await mtime(file)) > OLD.getTime(), 'the file was touched');

  // Stopped, the listener is called no more; one registered anew hears the next wake.
  stop();
  let again = 0;
  mta.onWake(() => again++);
  const heardThen = heard;
  control.wake();
  await waitFor(() => again > 0, { what: 'the new listener hearing a wake' });
  t.equal(heard, heardThen, 'a stopped listener is not called');
});

t.test('a busy signal touches its file once in 100 ms at most, and once after its last wake', async (t) => {
  const file = await wakeFile(t);
  const control = wakeSignal(file);
  const mta = wakeSignal(file);
  await utimes(file, OLD, OLD);
  let heard = 0;
  mta.onWake(() => heard++);
  // A wake at every turn of the event loop for 250 ms: the other signal's watch would hear a touch a turn.
  const began = performance.now();
  let lastWake = 0;
  while (performance.now() - began < 250) {
    lastWake = Date.now();
    control.wake();
    await new Promise((resolve) => setImmediate(resolve));
  }
  const elapsed = performance.now() - began;
  // The wakes after the last touch are a touch of their own, within 100 ms.
  await waitFor(async () => (await mtime(file)) >= lastWake, { what: 'a touch after the last wake' });
  await waitFor(() => heard > 0, { what: 'a touch heard' });
  // One at the first wake, one each 100 ms, one after the last wake (and a note of the kernel's may come late).
  t.ok(heard <= elapsed / 100 + 3, `${heard} touches heard in ${elapsed.toFixed(0)} ms of wakes at every turn`);
});

t.test('a wake that a listener of its own signal hears touches nothing', async (t) => {
  const file = await wakeFile(t);
  const all = wakeSignal(file);
  await utimes(file, OLD, OLD);
  let own = 0;
  all.onWake(() => own++);
  all.wake();
  t.equal(own, 1, 'its own listener was called at once');
  // A touch would come at the end of this turn of the event loop (setImmediate): two turns on, none came.
  for (let i = 0; i < 2; i++) await new Promise((resolve) => setImmediate(resolve));
  t.equal(await mtime(file), OLD.getTime(), 'the file was not touched');
});

t.test('a signal without a file, or whose file cannot be made, stays within its process', async (t) => {
  // A folder where a file is: the wake file cannot be made there, and the signal is made all the same.
  const blocked = await wakeFile(t);
  await writeFile(path.dirname(path.dirname(blocked)) + '/file', '');
  const unmade = wakeSignal(path.join(path.dirname(path.dirname(blocked)), 'file', 'wake', 'spool'));
  let heardThere = 0;
  unmade.onWake(() => heardThere++);
  unmade.wake();
  t.equal(heardThere, 1, 'a signal whose file could not be made still calls its own listeners');

  const one = wakeSignal();
  let heard = 0;
  const stop = one.onWake(() => heard++);
  one.wake();
  one.wake();
  t.equal(heard, 2, 'each wake calls the listener');
  stop();
  one.wake();
  t.equal(heard, 2, 'not after it stopped');
});
