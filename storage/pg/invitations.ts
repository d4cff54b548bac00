// Invitations to an organization: mailed links carrying a token whose hash is kept here.
import type { Queryable } from './client.js';
import type { OrgRole } from './organizations.js';

export interface Invitation {
  id: string;
  organizationId: string;
  email: string;
  role: OrgRole;
  createdAt: Date;
  expiresAt: Date;
}

const COLS = `id, organization_id AS "organizationId", email, role, created_at AS "createdAt",
  expires_at AS "expiresAt"`;

export async function insertInvitation(
  q: Queryable,
  i: {
    id: string;
    organizationId: string;
    email: string;
    role: OrgRole;
    tokenHash: string;
    invitedBy: string | null;
    now: Date;
    expiresAt: Date;
  },
): Promise<Invitation> {
  const rows = await q.query<Invitation>(
    `INSERT INTO invitations (id, organization_id, email, role, token_hash, invited_by, created_at, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${COLS}`,
    [i.id, i.organizationId, i.email, i.role, i.tokenHash, i.invitedBy, i.now, i.expiresAt],
  );
  return rows[0] as Invitation;
}

/** Pending: not accepted, not revoked, not expired (docs/api.md §3). */
export async function listPendingInvitations(q: Queryable, organizationId: string, now: Date): Promise<Invitation[]> {
  return q.query<Invitation>(
    `SELECT ${COLS} FROM invitations
     WHERE organization_id = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $2
     ORDER BY created_at, id`,
    [organizationId, now],
  );
}

export async function revokeInvitation(q: Queryable, organizationId: string, id: string, now: Date): Promise<boolean> {
  const rows = await q.query(
    `UPDATE invitations SET revoked_at = $3
     WHERE organization_id = $1 AND id::text = $2 AND accepted_at IS NULL AND revoked_at IS NULL
     RETURNING id`,
    [organizationId, id, now],
  );
  return rows.length > 0;
}

/** The invitation a token names if it is still pending, locked for the accepting transaction. */
export async function findPendingInvitationForUpdate(
  q: Queryable,
  tokenHash: string,
  now: Date,
): Promise<Invitation | null> {
  const rows = await q.query<Invitation>(
    `SELECT ${COLS} FROM invitations
     WHERE token_hash = $1 AND accepted_at IS NULL AND revoked_at IS NULL AND expires_at > $2 FOR UPDATE`,
    [tokenHash, now],
  );
  return rows[0] ?? null;
}

export async function markInvitationAccepted(q: Queryable, id: string, userId: string, now: Date): Promise<void> {
  await q.query('UPDATE invitations SET accepted_at = $3, accepted_by = $2 WHERE id = $1', [id, userId, now]);
}
