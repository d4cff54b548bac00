// Outcome batches written at once by several MTA processes (docs/decisions.md #58: they share the spool, and
// each writes its own batches) name the same sending capabilities, whose sent counts every delivered batch
// raises. Those rows must be locked in one order by every statement: otherwise two batches can each hold a row
// the other waits for, Postgres aborts one (deadlock, 40P01), and its messages, delivered already, wait out their
// lease to be sent again.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { deliveredOutcome, seedSendingMessages, type SendingMessage } from '../helpers/sending-messages.js';
import { recordOutcomes } from '../../storage/pg/deliveries.js';

// Without SVC_DATABASE_URL the test is skipped, not passed: the embedded database has one connection, so its
// statements never run at once; the SVC_DATABASE_URL pass of .ci/run runs it on a real Postgres.
const skip = process.env.SVC_DATABASE_URL ? false : 'concurrent statements need a real Postgres: set SVC_DATABASE_URL';

t.test('outcome batches written at once never deadlock on the capabilities they count', { skip }, async (t) => {
  const svc = await startTestService(t);
  const CAPS = 6;
  const PER_CAP = 240;
  const senders = [];
  for (let i = 0; i < CAPS; i++) senders.push(await sender(svc));
  const messages: SendingMessage[] = [];
  for (const s of senders) messages.push(...(await seedSendingMessages(svc.running.storage.db, s, PER_CAP)));

  // Shuffled, then cut into batches of 2–12: each batch names several capabilities, in no particular order, and
  // eight writers (the pool's connections) send theirs at once.
  for (let i = messages.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [messages[i], messages[j]] = [messages[j]!, messages[i]!];
  }
  const batches: SendingMessage[][] = [];
  for (let at = 0; at < messages.length;) {
    const size = 2 + Math.floor(Math.random() * 11);
    batches.push(messages.slice(at, at + size));
    at += size;
  }
  const WRITERS = 8;
  const errors: string[] = [];
  await Promise.all(
    Array.from({ length: WRITERS }, async (_, w) => {
      for (let b = w; b < batches.length; b += WRITERS) {
        await recordOutcomes(svc.running.storage.db, batches[b]!.map(deliveredOutcome)).catch(
          (err: Error & { code?: string }) => errors.push(`${err.code ?? ''} ${err.message}`),
        );
      }
    }),
  );
  t.same(errors, [], `${batches.length} batches from ${WRITERS} writers, none refused`);

  const counts = await svc.running.storage.db.query<{ id: string; n: number }>(
    'SELECT id, sent_count::int AS n FROM outbound_capabilities WHERE id = ANY($1::uuid[]) ORDER BY id',
    [senders.map((s) => s.outboundId)],
  );
  t.same(
    counts.map((c) => c.n),
    counts.map(() => PER_CAP),
    'each capability counts every delivery once',
  );
  const [events] = await svc.running.storage.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM message_events WHERE type = 'delivered' AND message_id = ANY($1::uuid[])`,
    [messages.map((m) => m.messageId)],
  );
  t.equal(events!.n, CAPS * PER_CAP, 'one delivered event per message');
});
