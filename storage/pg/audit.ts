// The audit log: one row per mutating request that succeeded.
import { pagedRows, type Paged, type PageRequest } from './cursor.js';
import type { Queryable } from './client.js';

export interface AuditEntry {
  id: string;
  createdAt: Date;
  actorKind: string;
  actorId: string | null;
  action: string;
  method: string;
  path: string;
  status: number;
  organizationId: string | null;
  projectId: string | null;
  targetId: string | null;
  requestId: string;
  ip: string | null;
}

export async function insertAudit(q: Queryable, e: AuditEntry): Promise<void> {
  await q.query(
    `INSERT INTO audit_log (id, created_at, actor_kind, actor_id, action, method, path, status,
       organization_id, project_id, target_id, request_id, ip)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
    [
      e.id,
      e.createdAt,
      e.actorKind,
      e.actorId,
      e.action,
      e.method,
      e.path,
      e.status,
      e.organizationId,
      e.projectId,
      e.targetId,
      e.requestId,
      e.ip,
    ],
  );
}

export async function listAudit(
  q: Queryable,
  f: { projectId?: string | null; action?: string | null },
  page: PageRequest,
): Promise<Paged<AuditEntry> | 'bad_cursor'> {
  return pagedRows<AuditEntry & Record<string, unknown>>(
    q,
    {
      select: `id, created_at AS "createdAt", actor_kind AS "actorKind", actor_id AS "actorId", action, method, path,
       status, organization_id AS "organizationId", project_id AS "projectId", target_id AS "targetId",
       request_id AS "requestId", ip`,
      from: 'audit_log',
      where: '($1::uuid IS NULL OR project_id = $1::uuid) AND ($2::text IS NULL OR action = $2)',
      order: 'seq DESC',
    },
    [f.projectId ?? null, f.action ?? null],
    page,
  );
}
