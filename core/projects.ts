// Projects and their API keys (docs/api.md §4.6, §4.7) as operations: creating a project with its first
// key, minting and rotating keys. The caller has already checked the principal's access to the project.
import { randomUUID } from 'node:crypto';
import { fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { newCredentialSecret, randomId } from './tokens.js';
import type { Queryable } from '../storage/pg/client.js';
import type { Sealer } from '../storage/secrets.js';
import { insertProject, type Project } from '../storage/pg/projects.js';
import { expireApiKey, findApiKey, insertApiKey, type ApiKey, type Managed } from '../storage/pg/api-keys.js';

/** docs/api.md §3 and §8: a rotated key works 24 h more. */
export const ROTATION_GRACE_MS = 24 * 3_600_000;
/** Scopes of a key minted without a `scopes` list: everything but project administration. */
export const DEFAULT_SCOPES = ['messages:send', 'messages:read', 'suppressions:read', 'suppressions:write'] as const;

/**
 * Mints a project key, with its secret (shown this once). New keys are platform-managed (tk_); local (svc_)
 * keys are the older kind, kept working and minted only by migrations and tests.
 */
export async function mintProjectKey(
  q: Queryable,
  sealer: Sealer,
  k: {
    projectId: string;
    label: string | null;
    scopes: readonly string[];
    allowedCidrs?: string[];
    managed?: Managed;
    rotatedFrom?: string;
    now: Date;
  },
): Promise<ApiKey & { secret: string }> {
  const managed = k.managed ?? 'platform';
  const keyId = randomId(managed === 'platform' ? 'tk_' : 'svc_');
  const { secret, sealed } = newCredentialSecret(sealer, 'project_api_key', keyId);
  const key = await insertApiKey(q, {
    id: randomUUID(),
    keyId,
    projectId: k.projectId,
    secretSealed: sealed,
    label: k.label,
    scopes: [...k.scopes],
    managed,
    allowedCidrs: k.allowedCidrs ?? [],
    rotatedFrom: k.rotatedFrom ?? null,
    now: k.now,
  });
  return { ...key, secret };
}

/** A project of the organization and its first key (project:admin), in one transaction. */
export async function createProject(
  deps: CoreDeps,
  c: { organizationId: string; name: string; createdBy: string | null; now: Date },
): Promise<{ project: Project; key: ApiKey & { secret: string } }> {
  const { db, sealer } = deps.storage;
  return db.tx(async (q) => {
    const project = await insertProject(q, {
      id: randomUUID(),
      organizationId: c.organizationId,
      name: c.name,
      now: c.now,
      createdBy: c.createdBy,
    });
    const key = await mintProjectKey(q, sealer, {
      projectId: project.id,
      label: 'default',
      scopes: ['project:admin'],
      now: c.now,
    });
    return { project, key };
  });
}

/** A live key of the project, by its key id, or 404. */
export async function liveProjectKey(deps: CoreDeps, projectId: string, keyId: string, now: Date): Promise<ApiKey> {
  const key = await findApiKey(deps.storage.db, projectId, keyId, now);
  if (!key) throw fail('not_found', 'No such key in this project.');
  return key;
}

/**
 * Rotates a platform-managed key: a new key with the same label, scopes and source addresses, and the old
 * one working for ROTATION_GRACE_MS more.
 */
export async function rotateProjectKey(
  deps: CoreDeps,
  projectId: string,
  keyId: string,
  now: Date,
): Promise<{ old: ApiKey; key: ApiKey & { secret: string } }> {
  const old = await liveProjectKey(deps, projectId, keyId, now);
  if (old.managed !== 'platform')
    throw fail('invalid_request', 'Only platform-managed (tk_) keys rotate; mint a new local key instead.');
  const { db, sealer } = deps.storage;
  return db.tx(async (q) => {
    await expireApiKey(q, old.id, new Date(now.getTime() + ROTATION_GRACE_MS));
    const key = await mintProjectKey(q, sealer, {
      projectId: old.projectId,
      label: old.label,
      scopes: old.scopes,
      allowedCidrs: old.allowedCidrs,
      rotatedFrom: old.keyId,
      now,
    });
    return { old, key };
  });
}
