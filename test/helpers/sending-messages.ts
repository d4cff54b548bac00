// Messages of a sender (test/helpers/sender.ts) put straight into the database as the MTA holds them mid-attempt
// (`sending`), and the `delivered` outcome an attempt would record for one: what tests of the outcome statement
// and its writer need without delivering anything.
import type { Queryable } from '../../storage/pg/client.js';
import type { Outcome } from '../../storage/pg/deliveries.js';
import type { Sender } from './sender.js';

export interface SendingMessage {
  messageId: string;
  projectId: string;
  outboundId: string;
}

export async function seedSendingMessages(db: Queryable, s: Sender, n: number): Promise<SendingMessage[]> {
  const rows = await db.query<{ id: string }>(
    `INSERT INTO messages (id, project_id, organization_id, outbound_id, status, from_header, from_address, to_address,
       subject, message_id_header, return_path, size_bytes, attempts, created_at, updated_at)
     SELECT gen_random_uuid(), $1, $2, $3, 'sending', 'a@' || $4, 'a@' || $4, 'r' || g || '@example.net', 's',
       '<' || gen_random_uuid() || '@' || $4 || '>', 'b@' || $4, 100, 0, now(), now()
     FROM generate_series(1, $5::int) AS g RETURNING id`,
    [s.projectId, s.orgId, s.outboundId, s.domain, n],
  );
  return rows.map((r) => ({ messageId: r.id, projectId: s.projectId, outboundId: s.outboundId }));
}

export function deliveredOutcome(m: SendingMessage): Outcome {
  return {
    messageId: m.messageId,
    projectId: m.projectId,
    status: 'delivered',
    attempts: 1,
    detail: { attempt: 1, reply: '250 ok' },
    outboundId: m.outboundId,
    at: new Date(),
  };
}
