// The MTA's reads of spooled messages by id stay probes of the primary key after the table has outgrown the plan
// Postgres keeps for them (docs/decisions.md #82). A named statement's plan is made for the table as it is when a
// connection first runs it; with no ANALYZE since (autovacuum off, or not come by yet), a plan made while messages was
// small, a scan of the whole table, stays while the table grows. Counted by the table's own statistics: a read of 30
// ids must add index scans and no sequential scan.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { seedSendingMessages } from '../helpers/sending-messages.js';
import { openPostgres, type Db } from '../../storage/pg/client.js';
import { messageStatuses } from '../../storage/pg/deliveries.js';
import { lockMessages } from '../../storage/pg/recipients.js';

// The embedded database makes a plan for every statement, each time: nothing is kept to go stale.
const skip = process.env.SVC_DATABASE_URL
  ? false
  : 'plans kept across statements need a real Postgres: set SVC_DATABASE_URL';

interface Scans {
  seq: number;
  idx: number;
}

/** The scans of messages so far, as this connection's statistics say once flushed. */
async function scans(db: Db): Promise<Scans> {
  await db.query('SELECT pg_stat_force_next_flush()');
  await db.query('SELECT pg_stat_clear_snapshot()');
  const [r] = await db.query<{ seq: string; idx: string }>(
    "SELECT seq_scan AS seq, idx_scan AS idx FROM pg_stat_user_tables WHERE relname = 'messages'",
  );
  return { seq: Number(r!.seq), idx: Number(r!.idx) };
}

t.test('reads of messages by id probe the key after the table outgrows the plan made for it', { skip }, async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  // One connection: the plan it keeps is the one the reads below use.
  const db = openPostgres(svc.databaseUrl!, 1);
  t.teardown(() => db.close());
  const small = (await seedSendingMessages(db, s, 20)).map((m) => m.messageId);
  // More than five runs on the small table: Postgres then keeps one generic plan.
  for (let i = 0; i < 8; i++) {
    await messageStatuses(db, small);
    await messageStatuses(db, small, small.slice(0, 2));
    await db.tx((q) => lockMessages(q, small));
  }
  const grown = (await seedSendingMessages(db, s, 20_000)).map((m) => m.messageId);
  const ids = grown.slice(-30);

  for (const [name, read] of [
    ['messageStatuses', () => messageStatuses(db, ids)],
    ['messageStatuses with recipients', () => messageStatuses(db, ids, ids.slice(0, 2))],
    ['lockMessages', () => db.tx((q) => lockMessages(q, ids))],
  ] as const) {
    const before = await scans(db);
    const out = await read();
    const after = await scans(db);
    if (out instanceof Map) t.equal(out.size, ids.length, `${name}: every message found`);
    t.equal(after.seq - before.seq, 0, `${name}: no scan of the whole table`);
    t.ok(after.idx - before.idx >= ids.length, `${name}: a probe of the key for each id`);
  }
});
