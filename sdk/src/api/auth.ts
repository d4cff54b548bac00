// docs/api.md §4.2 (auth) and the account-token routes of §4.10.
import { Type } from '@sinclair/typebox';
import { Email, NewPassword, Nullable, Obj, Ok, Timestamp, routes } from './types.js';

export const User = Type.Object({
  id: Type.String(),
  email: Type.String(),
  role: Type.Union([Type.Literal('customer'), Type.Literal('staff')]),
  email_verified_at: Nullable(Timestamp),
  created_at: Timestamp,
  updated_at: Timestamp,
});

const Session = Type.Object({
  user: User,
  accountToken: Type.Object({ tokenId: Type.String(), secret: Type.String() }),
});

const AccountToken = Type.Object({
  id: Type.String(),
  tokenId: Type.String(),
  label: Nullable(Type.String()),
  createdAt: Timestamp,
});

export const authRoutes = routes({
  'auth.signup': {
    method: 'POST',
    path: '/auth/v1/signup',
    auth: 'public',
    summary: 'Create a user and its first account token.',
    body: Obj({ email: Email, password: NewPassword }),
    response: Session,
  },
  'auth.login': {
    method: 'POST',
    path: '/auth/v1/login',
    auth: 'public',
    summary: 'Exchange email and password for a new account token.',
    body: Obj({ email: Type.String({ maxLength: 254 }), password: Type.String({ maxLength: 1024 }) }),
    response: Session,
  },
  'auth.logout': {
    method: 'POST',
    path: '/auth/v1/logout',
    auth: ['account_token'],
    summary: 'Revoke the calling account token.',
    response: Ok,
  },
  'auth.password.forgot': {
    method: 'POST',
    path: '/auth/v1/password/forgot',
    auth: 'public',
    summary: 'Mail a single-use reset link valid for one hour, if the account exists. Always { ok: true }.',
    body: Obj({ email: Type.String({ minLength: 1, maxLength: 254 }) }),
    response: Ok,
  },
  'auth.password.reset': {
    method: 'POST',
    path: '/auth/v1/password/reset',
    auth: 'public',
    summary: "Set a new password with a reset token; revokes all the user's account tokens.",
    body: Obj({ token: Type.String({ minLength: 1, maxLength: 512 }), password: NewPassword }),
    response: Ok,
  },
  'auth.password.change': {
    method: 'POST',
    path: '/auth/v1/password/change',
    auth: ['account_token'],
    summary: 'Change the password; 401 when the current one is wrong.',
    body: Obj({ currentPassword: Type.String({ maxLength: 1024 }), newPassword: NewPassword }),
    response: Ok,
  },
  'console.accountTokens.create': {
    method: 'POST',
    path: '/console/v1/account-tokens',
    auth: ['account_token'],
    summary: 'Mint an account token for the caller; the secret is returned once.',
    body: Obj({ label: Type.Optional(Type.String({ maxLength: 200 })) }),
    response: Type.Intersect([AccountToken, Type.Object({ secret: Type.String(), warning: Type.String() })]),
  },
  'console.accountTokens.list': {
    method: 'GET',
    path: '/console/v1/account-tokens',
    auth: ['account_token'],
    summary: "The caller's own live account tokens, without secrets.",
    response: Type.Object({ tokens: Type.Array(AccountToken) }),
  },
  'console.accountTokens.delete': {
    method: 'DELETE',
    path: '/console/v1/account-tokens/{id}',
    auth: ['account_token'],
    summary: "Revoke one of the caller's own tokens, by tokenId or id.",
    params: Type.Object({ id: Type.String({ maxLength: 200 }) }),
    response: Ok,
  },
});
