// docs/api.md §4.3 organizations: members, tokens, invitations, join codes, plan.
import { Type } from '@sinclair/typebox';
import { Email, Nullable, Obj, Ok, Timestamp, routes, type CredentialKind, type RouteSpec } from './types.js';
import { ROLES } from './permissions.js';

/** "Org auth" (docs/api.md §4): a member's account token, the organization's token, staff or the platform key. */
export const ORG_AUTH: readonly CredentialKind[] = ['account_token', 'organization_token', 'platform_admin'];

export const Role = Type.Union(ROLES.map((r) => Type.Literal(r)));
const OrgId = Type.String({ maxLength: 64 });
const byId = { kind: 'organization', in: 'params', field: 'id' } as const satisfies RouteSpec['target'];

export const Organization = Type.Object({
  id: Type.String(),
  name: Type.String(),
  plan: Type.Union([Type.Literal('free'), Type.Literal('payg')]),
  created_at: Timestamp,
  updated_at: Timestamp,
});

export const OrgToken = Type.Object({
  id: Type.String(),
  tokenId: Type.String(),
  label: Nullable(Type.String()),
  createdAt: Timestamp,
});
const MintedOrgToken = Type.Intersect([OrgToken, Type.Object({ secret: Type.String(), warning: Type.String() })]);
const Member = Type.Object({ userId: Type.String(), email: Type.String(), role: Role, joinedAt: Timestamp });
const Invitation = Type.Object({
  id: Type.String(),
  organizationId: Type.String(),
  email: Type.String(),
  role: Role,
  createdAt: Timestamp,
  expiresAt: Timestamp,
});
const JoinCode = Type.Object({
  id: Type.String(),
  role: Role,
  status: Type.Union([Type.Literal('active'), Type.Literal('used'), Type.Literal('expired'), Type.Literal('revoked')]),
  createdAt: Timestamp,
  expiresAt: Timestamp,
  usedAt: Nullable(Timestamp),
});

/** docs/api.md §2.2 organization usage; dailyLimit and remaining are null on `payg` (no cap). */
export const Usage = Type.Object({
  tier: Type.String(),
  dailyLimit: Nullable(Type.Integer()),
  usedToday: Type.Integer(),
  remaining: Nullable(Type.Integer()),
  overageToday: Type.Integer(),
});

export const InboxUsage = Type.Object({
  activeInboxes: Type.Integer(),
  billedCents: Type.Integer(),
  storageOverageGb: Type.Number(),
  storageBilledCents: Type.Integer(),
  totalBilledCents: Type.Integer(),
  monthStart: Type.String(),
});

const Name = Type.String({ minLength: 1, maxLength: 200 });
const Membership = Type.Object({ organization: Organization, role: Role });

export const organizationRoutes = routes({
  'console.organizations.roles': {
    method: 'GET',
    path: '/console/v1/organizations/roles',
    auth: 'public',
    summary: 'The fixed roles, the permissions each grants, and every permission key (docs/api.md §5.5).',
    response: Type.Object({
      roles: Type.Array(Type.Object({ role: Type.String(), permissions: Type.Array(Type.String()) })),
      permissions: Type.Array(Type.String()),
    }),
  },
  'console.organizations.create': {
    method: 'POST',
    path: '/console/v1/organizations',
    auth: ['account_token'],
    summary:
      'Create an organization; the caller becomes its sole owner. 409 already_in_organization if the caller belongs ' +
      'to one.',
    body: Obj({ name: Name }),
    response: Type.Object({ organization: Organization, organizationToken: MintedOrgToken }),
  },
  'console.organizations.list': {
    method: 'GET',
    path: '/console/v1/organizations',
    auth: ['account_token'],
    summary: "The caller's organizations, each with the caller's role.",
    response: Type.Object({ organizations: Type.Array(Type.Intersect([Organization, Type.Object({ role: Role })])) }),
  },
  'console.organizations.get': {
    method: 'GET',
    path: '/console/v1/organizations/{id}',
    auth: ORG_AUTH,
    target: byId,
    summary: 'The organization with members, projects, tokens, pending invitations, usage and inboxUsage.',
    params: Type.Object({ id: OrgId }),
    response: Type.Object({
      organization: Organization,
      members: Type.Array(Member),
      projects: Type.Array(
        Type.Object({ id: Type.String(), name: Type.String(), status: Type.String(), created_at: Timestamp }),
      ),
      tokens: Type.Array(OrgToken),
      invitations: Type.Array(Invitation),
      usage: Usage,
      inboxUsage: InboxUsage,
    }),
  },
  'console.organizations.update': {
    method: 'PATCH',
    path: '/console/v1/organizations/{id}',
    auth: ORG_AUTH,
    target: byId,
    permission: 'org:manage',
    summary: 'Rename the organization.',
    params: Type.Object({ id: OrgId }),
    body: Obj({ name: Name }),
    response: Type.Object({ organization: Organization }),
  },
  'console.organizations.plan': {
    method: 'POST',
    path: '/console/v1/organizations/{id}/plan',
    auth: ORG_AUTH,
    target: byId,
    permission: 'billing:manage',
    summary: 'Change the plan (free or payg).',
    params: Type.Object({ id: OrgId }),
    body: Obj({ plan: Type.Union([Type.Literal('free'), Type.Literal('payg')]) }),
    response: Type.Object({ organization: Organization }),
  },
  'console.organizations.tokens.create': {
    method: 'POST',
    path: '/console/v1/organizations/{id}/tokens',
    auth: ORG_AUTH,
    target: byId,
    permission: 'tokens:manage',
    summary: 'Mint an organization token (svco_); the secret is returned once.',
    params: Type.Object({ id: OrgId }),
    body: Obj({ label: Type.Optional(Type.String({ maxLength: 200 })) }),
    response: MintedOrgToken,
  },
  'console.organizations.tokens.list': {
    method: 'GET',
    path: '/console/v1/organizations/{id}/tokens',
    auth: ORG_AUTH,
    target: byId,
    summary: 'Organization tokens, without secrets.',
    params: Type.Object({ id: OrgId }),
    response: Type.Object({ tokens: Type.Array(OrgToken) }),
  },
  'console.organizations.tokens.delete': {
    method: 'DELETE',
    path: '/console/v1/organizations/{id}/tokens/{tokenId}',
    auth: ORG_AUTH,
    target: byId,
    permission: 'tokens:manage',
    summary: 'Revoke an organization token, by tokenId or id.',
    params: Type.Object({ id: OrgId, tokenId: Type.String({ maxLength: 200 }) }),
    response: Ok,
  },
  'console.organizations.invitations.create': {
    method: 'POST',
    path: '/console/v1/organizations/{id}/invitations',
    auth: ORG_AUTH,
    target: byId,
    permission: 'members:manage',
    summary: 'Invite by email (role defaults to member); the accept link is mailed and returned.',
    params: Type.Object({ id: OrgId }),
    body: Obj({ email: Email, role: Type.Optional(Role) }),
    response: Type.Object({ invitation: Invitation, acceptUrl: Type.String(), emailed: Type.Boolean() }),
  },
  'console.organizations.invitations.list': {
    method: 'GET',
    path: '/console/v1/organizations/{id}/invitations',
    auth: ORG_AUTH,
    target: byId,
    summary: 'Pending invitations (not accepted, not revoked, not expired).',
    params: Type.Object({ id: OrgId }),
    response: Type.Object({ invitations: Type.Array(Invitation) }),
  },
  'console.organizations.invitations.delete': {
    method: 'DELETE',
    path: '/console/v1/organizations/{id}/invitations/{invitationId}',
    auth: ORG_AUTH,
    target: byId,
    permission: 'members:manage',
    summary: 'Revoke a pending invitation.',
    params: Type.Object({ id: OrgId, invitationId: Type.String({ maxLength: 64 }) }),
    response: Ok,
  },
  'console.organizations.invitations.accept': {
    method: 'POST',
    path: '/console/v1/organizations/invitations/accept',
    auth: ['account_token'],
    summary: "Accept an invitation: 401 invalid or expired, 403 when the caller's email differs from the invited one.",
    body: Obj({ token: Type.String({ minLength: 1, maxLength: 512 }) }),
    response: Membership,
  },
  'console.organizations.joinCodes.create': {
    method: 'POST',
    path: '/console/v1/organizations/{id}/join-codes',
    auth: ORG_AUTH,
    target: byId,
    permission: 'members:manage',
    summary: 'Create a join code (SVC-XXXX-XXXX), shown once; an unknown role joins as member.',
    params: Type.Object({ id: OrgId }),
    body: Obj({ role: Type.Optional(Type.String({ maxLength: 50 })) }),
    response: Type.Object({ joinCode: JoinCode, code: Type.String(), warning: Type.String() }),
  },
  'console.organizations.joinCodes.list': {
    method: 'GET',
    path: '/console/v1/organizations/{id}/join-codes',
    auth: ORG_AUTH,
    target: byId,
    summary: 'Join codes with their status; never the codes themselves.',
    params: Type.Object({ id: OrgId }),
    response: Type.Object({ joinCodes: Type.Array(JoinCode) }),
  },
  'console.organizations.joinCodes.delete': {
    method: 'DELETE',
    path: '/console/v1/organizations/{id}/join-codes/{codeId}',
    auth: ORG_AUTH,
    target: byId,
    permission: 'members:manage',
    summary: 'Revoke a join code; 409 if it was already used.',
    params: Type.Object({ id: OrgId, codeId: Type.String({ maxLength: 64 }) }),
    response: Ok,
  },
  'console.organizations.join': {
    method: 'POST',
    path: '/console/v1/organizations/join',
    auth: ['account_token'],
    summary: 'Redeem a join code: 401 invalid, used or expired; 409 if already a member.',
    body: Obj({ code: Type.String({ minLength: 1, maxLength: 64 }) }),
    response: Membership,
  },
  'console.organizations.members.role': {
    method: 'POST',
    path: '/console/v1/organizations/{id}/members/{userId}/role',
    auth: ORG_AUTH,
    target: byId,
    permission: 'members:manage',
    summary: "Change a member's role; 409 if it would demote the only owner.",
    params: Type.Object({ id: OrgId, userId: Type.String({ maxLength: 64 }) }),
    body: Obj({ role: Role }),
    response: Type.Object({ member: Member }),
  },
  'console.organizations.members.delete': {
    method: 'DELETE',
    path: '/console/v1/organizations/{id}/members/{userId}',
    auth: ORG_AUTH,
    target: byId,
    permission: 'members:manage',
    summary: 'Remove a member; 409 if the member is the only owner.',
    params: Type.Object({ id: OrgId, userId: Type.String({ maxLength: 64 }) }),
    response: Ok,
  },
});
