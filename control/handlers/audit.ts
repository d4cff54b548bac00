// Audit log reads: docs/api.md §4.14 (platform-wide) and §4.10 (one project).
import { paged, pageRequest } from '../errors.js';
import { type auditRoutes } from '@svc-mail/sdk';
import type { Handlers } from '../deps.js';
import { listAudit, type AuditEntry } from '../../storage/pg/audit.js';

const auditJson = (e: AuditEntry) => ({
  id: e.id,
  createdAt: e.createdAt.toISOString(),
  actorKind: e.actorKind,
  actorId: e.actorId,
  action: e.action,
  method: e.method,
  path: e.path,
  status: e.status,
  organizationId: e.organizationId,
  projectId: e.projectId,
  targetId: e.targetId,
  requestId: e.requestId,
  ip: e.ip,
});

export const auditHandlers: Handlers<typeof auditRoutes> = {
  async 'admin.audit.list'({ query }, rc) {
    const page = paged(
      await listAudit(
        rc.deps.storage.db,
        { projectId: query.projectId ?? null, action: query.action ?? null },
        pageRequest(query),
      ),
    );
    return { entries: page.rows.map(auditJson), nextCursor: page.nextCursor };
  },

  async 'console.projects.audit'({ query }, rc) {
    const projectId = rc.access?.projectId;
    if (!projectId) throw new Error('route without a project target reached a project handler');
    const page = paged(
      await listAudit(rc.deps.storage.db, { projectId, action: query.action ?? null }, pageRequest(query)),
    );
    return { entries: page.rows.map(auditJson), nextCursor: page.nextCursor };
  },
};
