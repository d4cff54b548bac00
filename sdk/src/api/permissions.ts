// docs/api.md §5.5: the fixed roles and what each grants, as one table. Every write route names the
// permission it needs; reads need only membership (§5.4 rule 2).
import type { Permission } from './types.js';

export const PERMISSIONS: readonly Permission[] = [
  'org:manage',
  'billing:manage',
  'members:manage',
  'tokens:manage',
  'domains:manage',
  'projects:manage',
  'apikeys:manage',
];

export const ROLES = ['owner', 'admin', 'member', 'auditor', 'billing'] as const;
export type OrgRole = (typeof ROLES)[number];

export const ROLE_PERMISSIONS: Readonly<Record<OrgRole, readonly Permission[]>> = {
  // Everything, billing included; the last owner can never be demoted or removed.
  owner: PERMISSIONS,
  // All administration except billing.
  admin: PERMISSIONS.filter((p) => p !== 'billing:manage'),
  // Projects, API keys, domains; no organization administration.
  member: ['projects:manage', 'apikeys:manage', 'domains:manage'],
  // Read only.
  auditor: [],
  billing: ['billing:manage'],
};

export const can = (role: OrgRole, permission: Permission) => ROLE_PERMISSIONS[role].includes(permission);
