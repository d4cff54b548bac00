// Domain claims and their outbound (DKIM) and inbound (MX) capabilities.
import type { Queryable } from './client.js';
import { isPgError, PG_UNIQUE_VIOLATION } from './client.js';
import { isUuid } from '../../mail/uuid.js';
import type { DkimAlgorithm } from '../../mail/dkim-keys.js';

export type DomainStatus = 'pending' | 'verified';

export interface Claim {
  id: string;
  projectId: string;
  domain: string;
  apexClaimId: string | null;
  verifyToken: string;
  status: DomainStatus;
  verifiedAt: Date | null;
  lastCheckAt: Date | null;
  createdAt: Date;
}

export interface Outbound {
  id: string;
  claimId: string;
  projectId: string;
  domain: string;
  status: DomainStatus;
  verifiedAt: Date | null;
  dkimSelector: string;
  dkimPublic: string;
  ed25519Selector: string | null;
  ed25519Public: string | null;
  returnPathSubdomain: string;
  defaultDisplayName: string | null;
  sentCount: number;
  createdAt: Date;
  /** A key minted by rotate and not yet promoted by verify (docs/api.md §4.5, DKIM key rotation). */
  pendingDkimSelector: string | null;
  pendingDkimAlgorithm: DkimAlgorithm | null;
  pendingDkimPublic: string | null;
  pendingDkimCreatedAt: Date | null;
  /** Selectors replaced by a promotion, kept listed for RETIRED_LISTED_MS (pruned on the next promotion). */
  dkimRetired: RetiredSelector[];
}

/** A selector that signed before a rotation; its record should stay published while mail signed with it travels. */
export interface RetiredSelector {
  selector: string;
  algorithm: DkimAlgorithm;
  /** ISO 8601. */
  retiredAt: string;
}

export interface Inbound {
  id: string;
  claimId: string;
  projectId: string;
  domain: string;
  status: DomainStatus;
  verifiedAt: Date | null;
  createdAt: Date;
}

const CLAIM = `id, project_id AS "projectId", domain, apex_claim_id AS "apexClaimId", verify_token AS "verifyToken",
  status, verified_at AS "verifiedAt", last_check_at AS "lastCheckAt", created_at AS "createdAt"`;
const OUTBOUND = `id, claim_id AS "claimId", project_id AS "projectId", domain, status, verified_at AS "verifiedAt",
  dkim_selector AS "dkimSelector", dkim_public AS "dkimPublic",
  ed25519_selector AS "ed25519Selector", ed25519_public AS "ed25519Public",
  return_path_subdomain AS "returnPathSubdomain", default_display_name AS "defaultDisplayName",
  sent_count AS "sentCount", created_at AS "createdAt",
  pending_dkim_selector AS "pendingDkimSelector", pending_dkim_algorithm AS "pendingDkimAlgorithm",
  pending_dkim_public AS "pendingDkimPublic", pending_dkim_created_at AS "pendingDkimCreatedAt",
  dkim_retired AS "dkimRetired"`;
const INBOUND = `id, claim_id AS "claimId", project_id AS "projectId", domain, status, verified_at AS "verifiedAt",
  created_at AS "createdAt"`;

/** The claim of exactly this name, whoever holds it. */
export async function findClaimByDomain(q: Queryable, domain: string): Promise<Claim | null> {
  const rows = await q.query<Claim>(`SELECT ${CLAIM} FROM domain_claims WHERE domain = $1`, [domain]);
  return rows[0] ?? null;
}

/** Inserts a claim; 'taken' when the name is already claimed (the UNIQUE constraint decides races). */
export async function insertClaim(
  q: Queryable,
  c: {
    id: string;
    projectId: string;
    domain: string;
    apexClaimId: string | null;
    verifyToken: string;
    verified: boolean;
    now: Date;
  },
): Promise<Claim | 'taken'> {
  try {
    const rows = await q.query<Claim>(
      `INSERT INTO domain_claims (id, project_id, domain, apex_claim_id, verify_token, status, verified_at, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING ${CLAIM}`,
      [
        c.id,
        c.projectId,
        c.domain,
        c.apexClaimId,
        c.verifyToken,
        c.verified ? 'verified' : 'pending',
        c.verified ? c.now : null,
        c.now,
      ],
    );
    return rows[0] as Claim;
  } catch (err) {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) return 'taken';
    throw err;
  }
}

export async function getClaim(q: Queryable, projectId: string, id: string): Promise<Claim | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<Claim>(`SELECT ${CLAIM} FROM domain_claims WHERE project_id = $1 AND id = $2`, [
    projectId,
    id,
  ]);
  return rows[0] ?? null;
}

export async function listClaims(q: Queryable, projectId: string): Promise<Claim[]> {
  return q.query<Claim>(`SELECT ${CLAIM} FROM domain_claims WHERE project_id = $1 ORDER BY domain`, [projectId]);
}

/**
 * Records a verification attempt unless the previous one was under `minGapMs` ago: false means
 * throttled. One UPDATE, so two concurrent attempts cannot both pass the throttle.
 */
export async function touchClaimCheck(q: Queryable, id: string, now: Date, minGapMs: number): Promise<boolean> {
  const rows = await q.query(
    `UPDATE domain_claims SET last_check_at = $2
     WHERE id = $1 AND (last_check_at IS NULL OR last_check_at <= $3) RETURNING id`,
    [id, now, new Date(now.getTime() - minGapMs)],
  );
  return rows.length > 0;
}

export async function markClaimVerified(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query(`UPDATE domain_claims SET status = 'verified', verified_at = coalesce(verified_at, $2) WHERE id = $1`, [
    id,
    now,
  ]);
}

/** Subdomain claims under an apex claim (they block its release). */
export async function countChildClaims(q: Queryable, apexClaimId: string): Promise<number> {
  const rows = await q.query<{ n: number }>('SELECT count(*)::int AS n FROM domain_claims WHERE apex_claim_id = $1', [
    apexClaimId,
  ]);
  return rows[0]?.n ?? 0;
}

export async function deleteClaim(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM domain_claims WHERE id = $1', [id]);
}

export async function listOutbound(q: Queryable, claimIds: string[]): Promise<Outbound[]> {
  return q.query<Outbound>(
    `SELECT ${OUTBOUND} FROM outbound_capabilities WHERE claim_id = ANY($1::uuid[]) ORDER BY domain`,
    [claimIds],
  );
}

export async function listInbound(q: Queryable, claimIds: string[]): Promise<Inbound[]> {
  return q.query<Inbound>(
    `SELECT ${INBOUND} FROM inbound_capabilities WHERE claim_id = ANY($1::uuid[]) ORDER BY domain`,
    [claimIds],
  );
}

export async function getOutbound(
  q: Queryable,
  projectId: string,
  id: string,
): Promise<(Outbound & { dkimPrivateSealed: string }) | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<Outbound & { dkimPrivateSealed: string }>(
    `SELECT ${OUTBOUND}, dkim_private_sealed AS "dkimPrivateSealed" FROM outbound_capabilities
     WHERE project_id = $1 AND id = $2`,
    [projectId, id],
  );
  return rows[0] ?? null;
}

export async function getInbound(q: Queryable, projectId: string, id: string): Promise<Inbound | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<Inbound>(`SELECT ${INBOUND} FROM inbound_capabilities WHERE project_id = $1 AND id = $2`, [
    projectId,
    id,
  ]);
  return rows[0] ?? null;
}

/** Inserts an outbound capability; 'taken' when the (sub)domain already has one, anywhere. */
export async function insertOutbound(
  q: Queryable,
  o: {
    id: string;
    claimId: string;
    projectId: string;
    domain: string;
    verified: boolean;
    now: Date;
    dkimSelector: string;
    dkimPrivateSealed: string;
    dkimPublic: string;
    ed25519?: { selector: string; privateSealed: string; public: string };
    returnPathSubdomain: string;
  },
): Promise<'ok' | 'taken'> {
  try {
    await q.query(
      `INSERT INTO outbound_capabilities (id, claim_id, project_id, domain, status, verified_at,
         dkim_selector, dkim_private_sealed, dkim_public, ed25519_selector, ed25519_private_sealed, ed25519_public,
         return_path_subdomain, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)`,
      [
        o.id,
        o.claimId,
        o.projectId,
        o.domain,
        o.verified ? 'verified' : 'pending',
        o.verified ? o.now : null,
        o.dkimSelector,
        o.dkimPrivateSealed,
        o.dkimPublic,
        o.ed25519?.selector ?? null,
        o.ed25519?.privateSealed ?? null,
        o.ed25519?.public ?? null,
        o.returnPathSubdomain,
        o.now,
      ],
    );
    return 'ok';
  } catch (err) {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) return 'taken';
    throw err;
  }
}

export async function insertInbound(
  q: Queryable,
  i: { id: string; claimId: string; projectId: string; domain: string; now: Date },
): Promise<'ok' | 'taken'> {
  try {
    await q.query(
      `INSERT INTO inbound_capabilities (id, claim_id, project_id, domain, created_at) VALUES ($1, $2, $3, $4, $5)`,
      [i.id, i.claimId, i.projectId, i.domain, i.now],
    );
    return 'ok';
  } catch (err) {
    if (isPgError(err, PG_UNIQUE_VIOLATION)) return 'taken';
    throw err;
  }
}

export async function markOutboundVerified(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE outbound_capabilities SET status = 'verified', verified_at = coalesce(verified_at, $2) WHERE id = $1`,
    [id, now],
  );
}

export async function markInboundVerified(q: Queryable, id: string, now: Date): Promise<void> {
  await q.query(
    `UPDATE inbound_capabilities SET status = 'verified', verified_at = coalesce(verified_at, $2) WHERE id = $1`,
    [id, now],
  );
}

/** Mints (or replaces: one pending key at most) the capability's pending DKIM key. */
export async function setPendingDkim(
  q: Queryable,
  id: string,
  k: { selector: string; algorithm: DkimAlgorithm; privateSealed: string; public: string; now: Date },
): Promise<void> {
  await q.query(
    `UPDATE outbound_capabilities SET pending_dkim_selector = $2, pending_dkim_algorithm = $3,
       pending_dkim_private_sealed = $4, pending_dkim_public = $5, pending_dkim_created_at = $6
     WHERE id = $1`,
    [id, k.selector, k.algorithm, k.privateSealed, k.public, k.now],
  );
}

/**
 * Promotes the pending key `selector` into the slot of its algorithm (RSA, or the Ed25519 second signature)
 * and lists the selector it replaces as retired at `now`; retired entries from before `keepSince` are dropped.
 * Bumps dkim_version, which the MTA's key cache watches. False when that key is no longer the pending one
 * (a rotate replaced it meanwhile). One statement: its right-hand sides all read the row as it was.
 */
export async function promotePendingDkim(
  q: Queryable,
  id: string,
  selector: string,
  now: Date,
  keepSince: Date,
): Promise<boolean> {
  const rows = await q.query(
    `UPDATE outbound_capabilities SET
       dkim_retired = (SELECT coalesce(jsonb_agg(e), '[]'::jsonb) FROM jsonb_array_elements(dkim_retired) e
                       WHERE (e->>'retiredAt')::timestamptz > $3)
         || CASE
              WHEN pending_dkim_algorithm = 'rsa'
                THEN jsonb_build_array(jsonb_build_object('selector', dkim_selector, 'algorithm', 'rsa',
                       'retiredAt', $4::text))
              WHEN ed25519_selector IS NOT NULL
                THEN jsonb_build_array(jsonb_build_object('selector', ed25519_selector, 'algorithm', 'ed25519',
                       'retiredAt', $4::text))
              ELSE '[]'::jsonb
            END,
       dkim_selector = CASE WHEN pending_dkim_algorithm = 'rsa' THEN pending_dkim_selector ELSE dkim_selector END,
       dkim_private_sealed = CASE WHEN pending_dkim_algorithm = 'rsa' THEN pending_dkim_private_sealed
                             ELSE dkim_private_sealed END,
       dkim_public = CASE WHEN pending_dkim_algorithm = 'rsa' THEN pending_dkim_public ELSE dkim_public END,
       ed25519_selector = CASE WHEN pending_dkim_algorithm = 'ed25519' THEN pending_dkim_selector
                          ELSE ed25519_selector END,
       ed25519_private_sealed = CASE WHEN pending_dkim_algorithm = 'ed25519' THEN pending_dkim_private_sealed
                                ELSE ed25519_private_sealed END,
       ed25519_public = CASE WHEN pending_dkim_algorithm = 'ed25519' THEN pending_dkim_public
                        ELSE ed25519_public END,
       pending_dkim_selector = NULL, pending_dkim_algorithm = NULL, pending_dkim_private_sealed = NULL,
       pending_dkim_public = NULL, pending_dkim_created_at = NULL,
       dkim_version = dkim_version + 1
     WHERE id = $1 AND pending_dkim_selector = $2
     RETURNING id`,
    [id, selector, keepSince, now.toISOString()],
  );
  return rows.length > 0;
}

export async function setDisplayName(q: Queryable, id: string, name: string | null): Promise<void> {
  await q.query('UPDATE outbound_capabilities SET default_display_name = $2 WHERE id = $1', [id, name]);
}

export async function deleteOutbound(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM outbound_capabilities WHERE id = $1', [id]);
}

export async function deleteInbound(q: Queryable, id: string): Promise<void> {
  await q.query('DELETE FROM inbound_capabilities WHERE id = $1', [id]);
}

/** Whether any outbound capability of the claim has sent mail (that blocks a release). */
export async function claimHasSent(q: Queryable, claimId: string): Promise<boolean> {
  const rows = await q.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM outbound_capabilities WHERE claim_id = $1 AND sent_count > 0',
    [claimId],
  );
  return (rows[0]?.n ?? 0) > 0;
}

/**
 * Admin force-verify (docs/api.md §4.14): an outbound capability id, or a claim id (the claim and all its
 * outbound capabilities). Returns what was marked, or null when the id names neither.
 */
export async function forceVerify(
  q: Queryable,
  id: string,
  now: Date,
): Promise<{ claimId: string; outboundIds: string[] } | null> {
  if (!isUuid(id)) return null;
  const cap = await q.query<{ claim_id: string }>(
    `UPDATE outbound_capabilities SET status = 'verified', verified_at = coalesce(verified_at, $2)
     WHERE id = $1 RETURNING claim_id`,
    [id, now],
  );
  const claimId = cap[0]?.claim_id ?? id;
  const claim = await q.query(
    `UPDATE domain_claims SET status = 'verified', verified_at = coalesce(verified_at, $2) WHERE id = $1 RETURNING id`,
    [claimId, now],
  );
  if (!cap[0] && !claim[0]) return null;
  const outs = cap[0]
    ? [id]
    : (
        await q.query<{ id: string }>(
          `UPDATE outbound_capabilities SET status = 'verified', verified_at = coalesce(verified_at, $2)
           WHERE claim_id = $1 RETURNING id`,
          [claimId, now],
        )
      ).map((r) => r.id);
  return { claimId, outboundIds: outs };
}
