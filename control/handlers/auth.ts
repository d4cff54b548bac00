// Spec §4.2 and the account-token routes of §4.10.
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { authRoutes } from '../api/auth.js';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail } from '../errors.js';
import { hashPassword, verifyPassword, unusableHash } from '../passwords.js';
import { mintAccountToken, SECRET_WARNING } from '../../core/tokens.js';
import { queueNotification } from '../notify.js';
import type { PrincipalOf } from '../principal.js';
import {
  findUserWithHash,
  findUserWithHashByEmail,
  insertUser,
  setPasswordHash,
  type User,
} from '../../storage/pg/users.js';
import { listTokens, revokeAllTokens, revokeToken } from '../../storage/pg/tokens.js';
import { consumePasswordReset, insertPasswordReset, retirePasswordResets } from '../../storage/pg/password-resets.js';

/** Spec §8: a reset link is valid for one hour. */
export const RESET_TTL_MS = 60 * 60_000;

const iso = (d: Date | null) => (d === null ? null : d.toISOString());

export const userJson = (u: User) => ({
  id: u.id,
  email: u.email,
  role: u.role,
  email_verified_at: iso(u.email_verified_at),
  created_at: u.created_at.toISOString(),
  updated_at: u.updated_at.toISOString(),
});

export function account(rc: RequestCtx): PrincipalOf<'account_token'> {
  if (rc.principal?.kind !== 'account_token') throw fail('unauthorized', 'Request authentication failed.');
  return rc.principal;
}

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');
const badLogin = () => fail('unauthorized', 'Email or password is wrong.');

export const authHandlers: Handlers<typeof authRoutes> = {
  async 'auth.signup'({ body }, { deps, now }) {
    const passwordHash = await hashPassword(body.password, deps.passwordLogN);
    const { db, sealer } = deps.storage;
    return db.tx(async (q) => {
      const user = await insertUser(q, {
        id: randomUUID(),
        email: body.email.trim(),
        passwordHash,
        role: 'customer',
        now,
      });
      if (!user) throw fail('conflict', 'An account with this email already exists.');
      const token = await mintAccountToken(q, sealer, { userId: user.id, label: 'signup', now });
      return { user: userJson(user), accountToken: { tokenId: token.tokenId, secret: token.secret } };
    });
  },

  async 'auth.login'({ body }, { deps, now }) {
    const { db, sealer } = deps.storage;
    const found = await findUserWithHashByEmail(db, body.email.trim());
    // Verify against a dummy hash when there is no such user, so timing does not tell.
    const ok = await verifyPassword(body.password, found?.password_hash ?? unusableHash(deps.passwordLogN));
    if (!found || !ok) throw badLogin();
    const { password_hash: _, ...user } = found;
    const token = await mintAccountToken(db, sealer, { userId: user.id, label: 'login', now });
    return { user: userJson(user), accountToken: { tokenId: token.tokenId, secret: token.secret } };
  },

  async 'auth.logout'(_in, rc) {
    const me = account(rc);
    await revokeToken(rc.deps.storage.db, 'account', me.userId, me.keyId, rc.now);
    return { ok: true as const };
  },

  async 'auth.password.forgot'({ body }, { deps, now }) {
    const { db } = deps.storage;
    const user = await findUserWithHashByEmail(db, body.email.trim());
    if (user) {
      const token = randomBytes(32).toString('base64url');
      const link = `${deps.publicUrl()}/reset-password?token=${token}`;
      await db.tx(async (q) => {
        await insertPasswordReset(q, {
          id: randomUUID(),
          userId: user.id,
          tokenHash: hashToken(token),
          now,
          expiresAt: new Date(now.getTime() + RESET_TTL_MS),
        });
        await queueNotification(q, deps, {
          kind: 'password_reset',
          to: user.email,
          now,
          subject: 'Reset your password',
          text:
            `Someone asked to reset the password of the account ${user.email}.\n\n` +
            `To choose a new password, open this link within one hour (it works once):\n\n${link}\n\n` +
            `If it was not you, ignore this message: your password stays as it is.\n`,
        });
      });
    }
    return { ok: true as const };
  },

  async 'auth.password.reset'({ body }, { deps, now }) {
    const passwordHash = await hashPassword(body.password, deps.passwordLogN);
    await deps.storage.db.tx(async (q) => {
      const userId = await consumePasswordReset(q, hashToken(body.token), now);
      if (!userId) throw fail('unauthorized', 'The reset link is invalid, expired or already used.');
      await setPasswordHash(q, userId, passwordHash, now);
      await retirePasswordResets(q, userId, now);
      // gaps-filled.md #14: the user's sessions are its account tokens.
      await revokeAllTokens(q, 'account', userId, now);
    });
    return { ok: true as const };
  },

  async 'auth.password.change'({ body }, rc) {
    const me = account(rc);
    const { db } = rc.deps.storage;
    const user = await findUserWithHash(db, me.userId);
    if (!user || !(await verifyPassword(body.currentPassword, user.password_hash))) {
      throw fail('unauthorized', 'The current password is wrong.');
    }
    await setPasswordHash(db, me.userId, await hashPassword(body.newPassword, rc.deps.passwordLogN), rc.now);
    return { ok: true as const };
  },

  async 'console.accountTokens.create'({ body }, rc) {
    const me = account(rc);
    const t = await mintAccountToken(rc.deps.storage.db, rc.deps.storage.sealer, {
      userId: me.userId,
      label: body.label ?? null,
      now: rc.now,
    });
    return {
      id: t.id,
      tokenId: t.tokenId,
      secret: t.secret,
      label: t.label,
      createdAt: t.createdAt.toISOString(),
      warning: SECRET_WARNING,
    };
  },

  async 'console.accountTokens.list'(_in, rc) {
    const me = account(rc);
    const rows = await listTokens(rc.deps.storage.db, 'account', me.userId);
    return {
      tokens: rows.map((t) => ({ id: t.id, tokenId: t.tokenId, label: t.label, createdAt: t.createdAt.toISOString() })),
    };
  },

  async 'console.accountTokens.delete'({ params }, rc) {
    const me = account(rc);
    if (!(await revokeToken(rc.deps.storage.db, 'account', me.userId, params.id, rc.now))) {
      throw fail('not_found', 'No such account token.');
    }
    return { ok: true as const };
  },
};
