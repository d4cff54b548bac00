// docs/api.md §4.14 admin: platform and staff operations (users and their account tokens). Every route
// takes the platform key or a staff account token (a customer's account token gets 403).
import { Type } from '@sinclair/typebox';
import {
  Cursor,
  Email,
  Limit,
  NewPassword,
  Nullable,
  Obj,
  Ok,
  Timestamp,
  routes,
  type CredentialKind,
} from './types.js';
import { User } from './auth.js';
import { Project } from './projects.js';

/** docs/api.md §4.14: the platform key or a staff account token. */
export const ADMIN_AUTH: readonly CredentialKind[] = ['platform_admin', 'staff'];

const UserId = Type.Object({ id: Type.String({ maxLength: 64 }) });

const AccountToken = Type.Object({
  id: Type.String(),
  tokenId: Type.String(),
  label: Nullable(Type.String()),
  createdAt: Timestamp,
});

const RateLimit = Type.Object({
  /** The bucket in force: the organization's own where set, else the platform's (SVC_RATE_LIMIT_*). */
  burst: Type.Integer(),
  perSecond: Type.Number(),
  /** true when the organization has its own (set with the POST below), false when these are the defaults. */
  custom: Type.Boolean(),
});

const OrganizationId = Type.Object({ id: Type.String({ maxLength: 64 }) });

export const adminRoutes = routes({
  'admin.users.list': {
    method: 'GET',
    path: '/admin/v1/users',
    auth: ADMIN_AUTH,
    summary: 'Users, newest first; `email` narrows to one address (case-insensitive).',
    query: Obj({
      limit: Type.Optional(Limit),
      cursor: Type.Optional(Cursor),
      email: Type.Optional(Type.String({ maxLength: 254 })),
    }),
    response: Type.Object({ users: Type.Array(User), nextCursor: Nullable(Type.String()) }),
  },
  'admin.users.create': {
    method: 'POST',
    path: '/admin/v1/users',
    auth: ADMIN_AUTH,
    summary: 'Create a staff or customer user (docs/decisions.md #8); 409 when the email is taken.',
    body: Obj({
      email: Email,
      password: NewPassword,
      role: Type.Union([Type.Literal('staff'), Type.Literal('customer')]),
    }),
    response: Type.Object({ user: User }),
  },
  'admin.users.projects.list': {
    method: 'GET',
    path: '/admin/v1/users/{id}/projects',
    auth: ADMIN_AUTH,
    summary: 'Live projects of the organizations the user belongs to; 404 for an unknown user.',
    params: UserId,
    response: Type.Object({ projects: Type.Array(Project) }),
  },
  'admin.users.accountTokens.create': {
    method: 'POST',
    path: '/admin/v1/users/{id}/account-tokens',
    auth: ADMIN_AUTH,
    summary: 'Mint an account token for the user; the secret is returned once. 404 for an unknown user.',
    params: UserId,
    body: Obj({ label: Type.Optional(Type.String({ maxLength: 200 })) }),
    response: Type.Intersect([AccountToken, Type.Object({ secret: Type.String(), warning: Type.String() })]),
  },
  'admin.users.accountTokens.list': {
    method: 'GET',
    path: '/admin/v1/users/{id}/account-tokens',
    auth: ADMIN_AUTH,
    summary: "The user's live account tokens, without secrets. 404 for an unknown user.",
    params: UserId,
    response: Type.Object({ tokens: Type.Array(AccountToken) }),
  },
  'admin.accountTokens.delete': {
    method: 'DELETE',
    path: '/admin/v1/account-tokens/{id}',
    auth: ADMIN_AUTH,
    summary: "Revoke any user's account token, by tokenId or id; 404 when there is no such live token.",
    params: Type.Object({ id: Type.String({ maxLength: 200 }) }),
    response: Ok,
  },
  'admin.organizations.rateLimit.get': {
    method: 'GET',
    path: '/admin/v1/organizations/{id}/rate-limit',
    auth: ADMIN_AUTH,
    summary:
      "The request rate limit of every credential of the organization: its own, or the platform's default. " +
      '404 for an unknown organization.',
    params: OrganizationId,
    response: Type.Object({ rateLimit: RateLimit }),
  },
  'admin.organizations.rateLimit.set': {
    method: 'POST',
    path: '/admin/v1/organizations/{id}/rate-limit',
    auth: ADMIN_AUTH,
    summary:
      "Give the organization's credentials a bucket of their own (a bulk sender), or with nulls go back to the " +
      "platform's default. Applies from each credential's next request. 404 for an unknown organization.",
    params: OrganizationId,
    body: Obj({
      burst: Nullable(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
      perSecond: Nullable(Type.Number({ exclusiveMinimum: 0, maximum: 100_000 })),
    }),
    response: Type.Object({ rateLimit: RateLimit }),
  },
});
