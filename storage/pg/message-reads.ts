// Reads of messages and their events (docs/api.md §4.10, §4.11, §4.14). Writes belong to the sending path
// (storage/pg/messages.ts) and the MTA; nothing here changes a row.
import { pagedRows, type Paged, type PageRequest } from './cursor.js';
import type { Queryable } from './client.js';
import { isUuid } from '../../mail/uuid.js';
import { RECIPIENTS_JSON, type RecipientRecord } from './recipients.js';

export interface MessageRecord {
  id: string;
  projectId: string;
  status: string;
  fromHeader: string;
  to: string;
  /** docs/api.md §4.11: every recipient with its own status, in order (to, cc, bcc). */
  recipients: RecipientRecord[];
  subject: string;
  messageIdHeader: string;
  attempts: number;
  /** docs/api.md §4.11: [] and {} for a message sent without. */
  tags: { name: string; value: string }[];
  metadata: Record<string, string>;
  scheduledAt: Date | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface MessageEventRecord {
  id: string;
  type: string;
  detail: unknown;
  createdAt: Date;
}

const COLUMNS = `id, project_id AS "projectId", status, from_header AS "fromHeader", to_address AS "to",
  ${RECIPIENTS_JSON('messages')} AS recipients, subject,
  message_id_header AS "messageIdHeader", attempts, coalesce(tags, '[]'::jsonb) AS tags,
  coalesce(metadata, '{}'::jsonb) AS metadata, scheduled_at AS "scheduledAt", created_at AS "createdAt",
  updated_at AS "updatedAt"`;

/** One message by its id, or null (also for an id that is not a UUID). Access is the caller's to check. */
export async function getMessage(q: Queryable, id: string): Promise<MessageRecord | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<MessageRecord>(`SELECT ${COLUMNS} FROM messages WHERE id = $1`, [id]);
  return rows[0] ?? null;
}

/** A message's events, oldest first: by seq, since several events may share a millisecond. */
export async function listMessageEvents(q: Queryable, messageId: string): Promise<MessageEventRecord[]> {
  return q.query<MessageEventRecord>(
    `SELECT id, type, detail, created_at AS "createdAt" FROM message_events WHERE message_id = $1 ORDER BY seq`,
    [messageId],
  );
}

/**
 * Messages newest first, optionally of one project, of one status and with one tag (docs/api.md §4.11).
 * Ties in created_at are broken by id so that pages are stable. Served by messages_project_idx or
 * messages_status_idx; with a tag, a statement of its own, whose containment test the planner can serve
 * from the partial messages_tags_idx (a shared statement's generic plan could not).
 */
export async function listMessages(
  q: Queryable,
  f: { projectId?: string | null; status?: string | null; tag?: { name: string; value: string } | null },
  page: PageRequest,
): Promise<Paged<MessageRecord> | 'bad_cursor'> {
  return pagedRows<MessageRecord & Record<string, unknown>>(
    q,
    {
      select: COLUMNS,
      from: 'messages',
      where: `($1::uuid IS NULL OR project_id = $1::uuid) AND ($2::text IS NULL OR status = $2)
        AND ($3::jsonb IS NULL OR tags @> $3::jsonb)`,
      order: 'created_at DESC, id DESC',
    },
    [f.projectId ?? null, f.status ?? null, f.tag ? JSON.stringify([{ name: f.tag.name, value: f.tag.value }]) : null],
    page,
  );
}

export interface MessageStats {
  /** Live (not soft-deleted) projects. */
  projects: number;
  /** Suppression entries of live projects. */
  suppressions: number;
  /** Per status: every message, and those created in (since, until]. Statuses with none are absent. */
  byStatus: { status: string; total: number; recent: number }[];
}

/**
 * Platform counters in one round trip. The window is passed in rather than taken from SQL now(),
 * so it follows the service clock.
 */
export async function messageStats(q: Queryable, window: { since: Date; until: Date }): Promise<MessageStats> {
  const rows = await q.query<{
    projects: number;
    suppressions: number;
    by_status: { status: string; total: number; recent: number }[] | null;
  }>(
    `SELECT
       (SELECT count(*)::int FROM projects WHERE deleted_at IS NULL) AS projects,
       (SELECT count(*)::int FROM suppressions s JOIN projects p ON p.id = s.project_id
         WHERE p.deleted_at IS NULL) AS suppressions,
       (SELECT json_agg(json_build_object('status', status, 'total', total, 'recent', recent)) FROM (
          SELECT status, count(*)::int AS total,
                 (count(*) FILTER (WHERE created_at > $1::timestamptz AND created_at <= $2::timestamptz))::int AS recent
          FROM messages GROUP BY status) s) AS by_status`,
    [window.since, window.until],
  );
  const r = rows[0];
  return { projects: r?.projects ?? 0, suppressions: r?.suppressions ?? 0, byStatus: r?.by_status ?? [] };
}
