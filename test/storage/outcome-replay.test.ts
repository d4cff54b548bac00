// The outcome statement applies an outcome once per event id (storage/pg/deliveries.ts): a batch written again
// after its connection was lost, whose first commit may have landed before the loss, must count nothing twice:
// one event per outcome, one webhook delivery per event, one sent count per delivery, one suppression.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { deliveredOutcome, seedSendingMessages } from '../helpers/sending-messages.js';
import { recordOutcomes, type Outcome } from '../../storage/pg/deliveries.js';

t.test('a batch of outcomes written twice with the same event ids is applied once', async (t) => {
  const svc = await startTestService(t, { env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' } });
  const s = await sender(svc);
  await s.owner.client.console.projects.webhooks.create({
    id: s.projectId,
    url: 'http://127.0.0.1:9/hook',
    events: ['delivered', 'bounced'],
  });
  const { db } = svc.running.storage;
  const [m1, m2, m3] = await seedSendingMessages(db, s, 3);
  const batch: Outcome[] = [
    { ...deliveredOutcome(m1!), eventId: randomUUID() },
    { ...deliveredOutcome(m2!), eventId: randomUUID() },
    {
      ...deliveredOutcome(m3!),
      status: 'bounced',
      detail: { reply: '550 5.1.1 no such user' },
      outboundId: null,
      suppress: { address: 'gone@example.net', reason: 'hard_bounce', detail: '550 5.1.1' },
      eventId: randomUUID(),
    },
  ];
  await recordOutcomes(db, batch);
  await recordOutcomes(db, batch);

  const ids = [m1!.messageId, m2!.messageId, m3!.messageId];
  const events = await db.query<{ type: string; n: number }>(
    `SELECT type, count(*)::int AS n FROM message_events WHERE message_id = ANY($1::uuid[]) AND type <> 'queued'
     GROUP BY type ORDER BY type`,
    [ids],
  );
  t.same(
    events,
    [
      { type: 'bounced', n: 1 },
      { type: 'delivered', n: 2 },
    ],
    'one event per outcome',
  );
  const hooks = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM webhook_deliveries WHERE event_id = ANY($1::uuid[])`,
    [batch.map((o) => o.eventId)],
  );
  t.equal(hooks[0]!.n, 3, 'one webhook delivery per event');
  const [cap] = await db.query<{ n: number }>('SELECT sent_count::int AS n FROM outbound_capabilities WHERE id = $1', [
    s.outboundId,
  ]);
  t.equal(cap!.n, 2, 'each delivery counted once');
  const sup = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM suppressions WHERE project_id = $1 AND address = 'gone@example.net'`,
    [s.projectId],
  );
  t.equal(sup[0]!.n, 1, 'one suppression');
  const statuses = await db.query<{ status: string }>(
    'SELECT status FROM messages WHERE id = ANY($1::uuid[]) ORDER BY status',
    [ids],
  );
  t.same(
    statuses.map((r) => r.status),
    ['bounced', 'delivered', 'delivered'],
    'the statuses the batch set',
  );

  // A batch replayed after a later outcome of one of its messages: the message keeps its newer state.
  const [m4] = await seedSendingMessages(db, s, 1);
  const deferred: Outcome = {
    ...deliveredOutcome(m4!),
    status: 'deferred',
    detail: { reply: '451 4.3.0 later' },
    outboundId: null,
    eventId: randomUUID(),
  };
  await recordOutcomes(db, [deferred]);
  await recordOutcomes(db, [{ ...deliveredOutcome(m4!), attempts: 2, eventId: randomUUID() }]);
  await recordOutcomes(db, [deferred]);
  const [m4row] = await db.query<{ status: string; attempts: number }>(
    'SELECT status, attempts FROM messages WHERE id = $1',
    [m4!.messageId],
  );
  t.same(m4row, { status: 'delivered', attempts: 2 }, 'the replayed deferral did not undo the delivery');
});
