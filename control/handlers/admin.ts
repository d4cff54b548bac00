// Handlers of the admin route group (docs/api.md §4.14, docs/decisions.md #8): users and their account tokens.
import { randomUUID } from 'node:crypto';
import { type adminRoutes } from '@svc-mail/sdk';
import type { Handlers } from '../deps.js';
import { fail, paged, pageRequest } from '../errors.js';
import { hashPassword } from '../../core/passwords.js';
import { mintAccountToken, SECRET_WARNING } from '../../core/tokens.js';
import { userJson } from './auth.js';
import { projectJson } from './projects.js';
import type { Queryable } from '../../storage/pg/client.js';
import { getUser, insertUser, listUsers, type User } from '../../storage/pg/users.js';
import { listTokens, revokeToken } from '../../storage/pg/tokens.js';
import { listProjectsOfUser } from '../../storage/pg/projects.js';
import {
  organizationRateLimit,
  setOrganizationRateLimit,
  type OrganizationRateLimit,
} from '../../storage/pg/organizations.js';
import { defaultBucket } from '../middleware/authenticate.js';
import type { Config } from '../../config/schema.js';

/** The bucket in force for an organization's credentials (docs/api.md §4.14). */
function rateLimitJson(own: OrganizationRateLimit, config: Config) {
  const d = defaultBucket(config);
  return {
    burst: own.burst ?? d.burst,
    perSecond: own.perSecond ?? d.perSecond,
    custom: own.burst !== null || own.perSecond !== null,
  };
}

async function loadUser(q: Queryable, id: string): Promise<User> {
  const user = await getUser(q, id);
  if (!user) throw fail('not_found', 'No such user.');
  return user;
}

export const adminHandlers: Handlers<typeof adminRoutes> = {
  async 'admin.users.list'({ query }, rc) {
    const page = paged(await listUsers(rc.deps.storage.db, { email: query.email?.trim() || null }, pageRequest(query)));
    return { users: page.rows.map(userJson), nextCursor: page.nextCursor };
  },

  async 'admin.users.create'({ body }, rc) {
    const passwordHash = await hashPassword(body.password, rc.deps.passwordLogN);
    const user = await insertUser(rc.deps.storage.db, {
      id: randomUUID(),
      email: body.email.trim(),
      passwordHash,
      role: body.role,
      now: rc.now,
    });
    if (!user) throw fail('conflict', 'An account with this email already exists.');
    rc.audit.targetId = user.id;
    return { user: userJson(user) };
  },

  async 'admin.users.projects.list'({ params }, rc) {
    const { db } = rc.deps.storage;
    const user = await loadUser(db, params.id);
    return { projects: (await listProjectsOfUser(db, user.id)).map(projectJson) };
  },

  async 'admin.users.accountTokens.create'({ params, body }, rc) {
    const { db, sealer } = rc.deps.storage;
    const user = await loadUser(db, params.id);
    const t = await mintAccountToken(db, sealer, { userId: user.id, label: body.label ?? null, now: rc.now });
    rc.audit.targetId = t.tokenId;
    return {
      id: t.id,
      tokenId: t.tokenId,
      secret: t.secret,
      label: t.label,
      createdAt: t.createdAt.toISOString(),
      warning: SECRET_WARNING,
    };
  },

  async 'admin.users.accountTokens.list'({ params }, rc) {
    const { db } = rc.deps.storage;
    const user = await loadUser(db, params.id);
    const rows = await listTokens(db, 'account', user.id);
    return {
      tokens: rows.map((t) => ({ id: t.id, tokenId: t.tokenId, label: t.label, createdAt: t.createdAt.toISOString() })),
    };
  },

  async 'admin.accountTokens.delete'({ params }, rc) {
    if (!(await revokeToken(rc.deps.storage.db, 'account', null, params.id, rc.now)))
      throw fail('not_found', 'No such account token.');
    return { ok: true as const };
  },

  async 'admin.organizations.rateLimit.get'({ params }, rc) {
    const own = await organizationRateLimit(rc.deps.storage.db, params.id);
    if (!own) throw fail('not_found', 'No such organization.');
    return { rateLimit: rateLimitJson(own, rc.deps.ctx.config) };
  },

  async 'admin.organizations.rateLimit.set'({ params, body }, rc) {
    const own = await setOrganizationRateLimit(
      rc.deps.storage.db,
      params.id,
      { burst: body.burst, perSecond: body.perSecond },
      rc.now,
    );
    if (!own) throw fail('not_found', 'No such organization.');
    rc.audit.targetId = params.id;
    return { rateLimit: rateLimitJson(own, rc.deps.ctx.config) };
  },
};
