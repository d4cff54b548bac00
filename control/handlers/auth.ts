// docs/api.md §4.2 and the account-token routes of §4.10: HTTP shapes around core/accounts.ts.
import type { authRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { fail } from '../errors.js';
import { mintAccountToken, SECRET_WARNING } from '../../core/tokens.js';
import type { PrincipalOf } from '../principal.js';
import type { User } from '../../storage/pg/users.js';
import { listTokens, revokeToken } from '../../storage/pg/tokens.js';
import {
  changePassword,
  logIn,
  requestPasswordReset,
  resetPassword,
  signUp,
  type Session,
} from '../../core/accounts.js';

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

const sessionJson = (s: Session) => ({ user: userJson(s.user), accountToken: s.token });

export const authHandlers: Handlers<typeof authRoutes> = {
  async 'auth.signup'({ body }, { deps, now, ip }) {
    const { email, password } = body;
    return sessionJson(await signUp(deps, { email, password, passwordLogN: deps.passwordLogN, now, ip }));
  },

  async 'auth.login'({ body }, { deps, now, ip }) {
    const { email, password } = body;
    return sessionJson(await logIn(deps, { email, password, passwordLogN: deps.passwordLogN, now, ip }));
  },

  async 'auth.logout'(_in, rc) {
    const me = account(rc);
    await revokeToken(rc.deps.storage.db, 'account', me.userId, me.keyId, rc.now);
    return { ok: true as const };
  },

  async 'auth.password.forgot'({ body }, { deps, now, ip }) {
    const linkOf = (token: string) => `${deps.publicUrl()}/reset-password?token=${token}`;
    await requestPasswordReset(deps, { email: body.email, linkOf, now, ip });
    return { ok: true as const };
  },

  async 'auth.password.reset'({ body }, { deps, now }) {
    await resetPassword(deps, { token: body.token, password: body.password, passwordLogN: deps.passwordLogN, now });
    return { ok: true as const };
  },

  async 'auth.password.change'({ body }, rc) {
    const me = account(rc);
    await changePassword(rc.deps, {
      userId: me.userId,
      currentPassword: body.currentPassword,
      newPassword: body.newPassword,
      passwordLogN: rc.deps.passwordLogN,
      now: rc.now,
    });
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
