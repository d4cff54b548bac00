// Child process for the spool crash test (spool.test.ts): enqueues messages without pause, keeping many
// in flight at once, and prints each id on its own line only after its enqueue promise resolved, so
// that every line the parent reads is an acknowledgement. The parent kill -9s it mid-stream.
//
// Usage: node --import ./bin/resolve-sources.ts test/storage/spool-crash-child.ts <dataDir> <runTag>
import { createHash } from 'node:crypto';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { openLmdb } from '../../storage/lmdb/env.js';
import { openSpool, type SpoolEntry } from '../../storage/lmdb/spool.js';

/**
 * The body stored for an id, derived from the id alone so the parent can check it byte for byte. Sizes
 * vary from about 100 bytes to about 9 KB, so some bodies span LMDB overflow pages.
 */
export function crashBody(id: string, seq: number): Buffer {
  const seed = createHash('sha256').update(id).digest('hex');
  return Buffer.from(`Message-ID: <${id}@crash.test>\r\n\r\n` + seed.repeat(2 + (seq % 10) * 15));
}

export function crashEntry(id: string, seq: number): SpoolEntry {
  const domain = `d${seq % 5}.crash.test`;
  return {
    id,
    projectId: 'p-crash',
    domain,
    mailFrom: `bounce+${id}@rp.crash.test`,
    rcptTo: `rcpt${seq}@${domain}`,
    outboundId: 'o-crash',
    nextAttemptMs: 1_000 + (seq % 17),
    attempts: 0,
    createdMs: 1_000,
  };
}

export function crashId(tag: string, seq: number): string {
  return `${tag}-${seq}`;
}

/** The sequence number encoded in an id made by crashId. */
export function crashSeq(id: string): number {
  return Number(id.slice(id.lastIndexOf('-') + 1));
}

// Enough concurrency that every commit batches many enqueues and some are always in flight at the kill.
const IN_FLIGHT = 200;
// A bound so that an orphaned child (its parent gone without killing it) stops by itself.
const MAX_MESSAGES = 2_000_000;

async function main(): Promise<void> {
  const [dataDir, tag] = process.argv.slice(2);
  if (!dataDir || !tag) throw new Error('usage: spool-crash-child.ts <dataDir> <runTag>');
  const env = await openLmdb(dataDir);
  const spool = openSpool(env);
  // The parent closing the pipe means nobody is counting acknowledgements any more.
  process.stdout.on('error', () => process.exit(0));

  let seq = 0;
  let inFlight = 0;
  const pump = (): void => {
    while (inFlight < IN_FLIGHT && seq < MAX_MESSAGES) {
      const n = seq++;
      const id = crashId(tag, n);
      inFlight++;
      spool.enqueue(crashEntry(id, n), crashBody(id, n)).then(
        () => {
          inFlight--;
          // A write to a pipe is synchronous on Linux and a line this short is one atomic write(2):
          // once it returns, the acknowledgement is in the pipe even if we are killed right after.
          process.stdout.write(`${id}\n`);
          pump();
        },
        (err: unknown) => {
          process.stderr.write(`enqueue ${id} failed: ${String(err)}\n`);
          process.exit(1);
        },
      );
    }
    if (inFlight === 0) void env.close();
  };
  pump();
}

const entry = process.argv[1];
if (entry && import.meta.url === pathToFileURL(path.resolve(entry)).href) {
  main().catch((err: unknown) => {
    process.stderr.write(`${String((err as Error)?.stack ?? err)}\n`);
    process.exit(1);
  });
}
