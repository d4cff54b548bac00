// Child process for the shared-spool test (spool-share.test.ts): one MTA process's use of the spool, without
// the SMTP part. At start it takes back the leases of processes that are gone (as the delivery worker does),
// then it leases due entries in batches, reports each batch on stdout ("L <id>") before "delivering" it, and
// delivers each entry by reporting it ("D <id>") and then removing it. It exits once the spool is empty.
// Its stdout is a socket the parent reads: a line is written at once while the socket has room, else queued
// by Node and written later, in order, so what the parent reads was done, even if the child is killed right
// after. process.exit() drops lines still queued, so the clean exit waits for its last line to be written
// (the parent, busy in a loaded run, once missed the last hundred "D" lines of a run without it).
//
// With --gate it waits, after its start, for a line on stdin before leasing (so that the parent can start
// processes one after the other and then let them run together). With --hold=<n>, once it has delivered that
// many it reports the next batch leased ("H <batch size>") and waits for a line on stdin before delivering it,
// so that the parent can start another process while this one surely holds live leases. With --stall=<n>, once
// it has delivered that many it stalls in the middle of a batch, as a process stuck in SMTP would: half the batch
// reported delivered but not removed, the other half not delivered, "S <batch size>" reported; then it waits,
// holding those leases, to be killed.
//
// Usage: node --import ./bin/resolve-sources.ts test/storage/spool-share-child.ts <dataDir> [--gate] [--hold=<n>]
//        [--stall=<n>]
import { createInterface } from 'node:readline';
import { openLmdb } from '../../storage/lmdb/env.js';
import { openSpool } from '../../storage/lmdb/spool.js';

const BATCH = 25;
// Long enough that no lease runs out during the test: anything taken back is taken back by recoverLeases.
const LEASE_MS = 10 * 60_000;
// A bound so that an orphaned child (its parent gone without killing it) stops by itself.
const GIVE_UP_MS = 60_000;

async function main(): Promise<void> {
  const [dataDir, ...flags] = process.argv.slice(2);
  const flag = (name: string) => {
    const f = flags.find((x) => x.startsWith(`--${name}=`));
    return f ? Number(f.slice(name.length + 3)) : Infinity;
  };
  const stallAfter = flag('stall');
  let holdAfter = flag('hold');
  let delivered = 0;
  // Lines from the parent, each awaited in turn.
  const lines: string[] = [];
  let wake = () => {};
  if (flags.includes('--gate') || holdAfter < Infinity)
    createInterface({ input: process.stdin }).on('line', (l) => {
      lines.push(l);
      wake();
    });
  const nextLine = async (): Promise<string> => {
    while (!lines.length) await new Promise<void>((r) => (wake = r));
    return lines.shift()!;
  };
  if (!dataDir) throw new Error('usage: spool-share-child.ts <dataDir>');
  const env = await openLmdb(dataDir);
  const spool = openSpool(env);
  process.stdout.on('error', () => process.exit(0));
  const out = (line: string) => process.stdout.write(`${line}\n`);

  out(`R ${await spool.recoverLeases(Date.now())}`);
  if (flags.includes('--gate')) await nextLine();
  const giveUp = Date.now() + GIVE_UP_MS;
  while (spool.count() > 0 && Date.now() < giveUp) {
    const now = Date.now();
    const leased = await spool.lease(now, BATCH, now + LEASE_MS);
    if (!leased.length) {
      // Nothing due: the rest is leased by a sibling (or by a dead process, until someone recovers it).
      await new Promise((r) => setTimeout(r, 5));
      env.root.resetReadTxn();
      continue;
    }
    out(leased.map((e) => `L ${e.id}`).join('\n'));
    if (delivered >= stallAfter) {
      for (const e of leased.slice(0, leased.length >> 1)) out(`D ${e.id}`);
      out(`S ${leased.length}`);
      setInterval(() => {}, 1_000);
      return;
    }
    if (delivered >= holdAfter) {
      holdAfter = Infinity;
      out(`H ${leased.length}`);
      await nextLine();
    }
    delivered += leased.length;
    // Deliveries in parallel, as the worker's: their removes share commits.
    await Promise.all(
      leased.map(async (e) => {
        await new Promise((r) => setImmediate(r));
        out(`D ${e.id}`);
        await spool.remove(e.id);
      }),
    );
  }
  const left = spool.count();
  await env.close();
  // Written after every line before it: once this one is, none is left queued for process.exit() to drop.
  await new Promise<void>((resolve) => process.stdout.write(`E ${left}\n`, () => resolve()));
  process.exit(0); // stdin may still be open
}

main().catch((err: unknown) => {
  process.stderr.write(`${String((err as Error)?.stack ?? err)}\n`);
  process.exit(1);
});
