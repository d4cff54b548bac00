// docs/api.md §5.4: access to an organization or project is by membership. A non-member gets 404 (existence
// is never leaked), a member whose role lacks the route's permission 403, a project key without the
// route's scope 403. Staff, the platform key and the organization's own token act on it fully.
import type { Queryable } from '../storage/pg/client.js';
import { orgAccessRow, projectAccessRow, type OrgRole } from '../storage/pg/organizations.js';
import { can, type Permission, type RouteSpec, type Scope } from '@svc-mail/sdk';
import { fail } from './errors.js';
import type { Principal } from './principal.js';

export interface Access {
  organizationId: string;
  projectId: string | null;
  /** The caller's role when it acts as a member; null for staff, the platform key and tokens. */
  role: OrgRole | null;
  via: 'member' | 'staff' | 'platform_admin' | 'organization_token' | 'project_api_key';
}

const notFound = (what: string) => fail('not_found', `No such ${what}.`);

export function checkScope(p: Principal | null, scope: Scope | undefined): void {
  if (p?.kind === 'project_api_key' && scope && !p.scopes.includes(scope)) {
    throw fail('forbidden', `This key lacks the scope ${scope}.`);
  }
}

/**
 * What a route asks of a member beyond membership: a permission (docs/api.md §5.5) and/or a role
 * (docs/api.md §4.13).
 */
export interface Requirement {
  permission?: Permission;
  role?: 'owner';
}

function decide(
  p: Principal,
  found: { organizationId: string; role: OrgRole | null },
  need: Requirement,
  what: string,
): Access {
  const base = { organizationId: found.organizationId, projectId: null };
  switch (p.kind) {
    case 'platform_admin':
      return { ...base, role: null, via: 'platform_admin' };
    case 'organization_token':
      if (p.organizationId !== found.organizationId) throw notFound(what);
      return { ...base, role: null, via: 'organization_token' };
    case 'account_token':
      if (found.role) {
        if (need.permission && !can(found.role, need.permission))
          throw fail('forbidden', `Your role (${found.role}) lacks ${need.permission}.`);
        if (need.role && found.role !== need.role)
          throw fail('forbidden', `Only an ${need.role} may do this; your role is ${found.role}.`);
        return { ...base, role: found.role, via: 'member' };
      }
      // docs/decisions.md #8: staff act on every organization, read and write.
      if (p.userRole === 'staff') return { ...base, role: null, via: 'staff' };
      throw notFound(what);
    case 'project_api_key':
      throw notFound(what);
  }
}

export async function authorizeOrganization(
  q: Queryable,
  p: Principal,
  orgId: string,
  permission?: Permission,
  role?: Requirement['role'],
): Promise<Access> {
  const row = await orgAccessRow(q, orgId, p.kind === 'account_token' ? p.userId : null);
  if (!row) throw notFound('organization');
  return decide(p, { organizationId: row.id, role: row.role }, { permission, role }, 'organization');
}

export async function authorizeProject(
  q: Queryable,
  p: Principal,
  projectId: string,
  permission?: Permission,
  scope?: Scope,
  role?: Requirement['role'],
): Promise<Access> {
  const row = await projectAccessRow(q, projectId, p.kind === 'account_token' ? p.userId : null);
  if (!row) throw notFound('project');
  if (p.kind === 'project_api_key') {
    if (p.projectId !== row.id) throw notFound('project');
    checkScope(p, scope);
    return { organizationId: row.organization_id, projectId: row.id, role: null, via: 'project_api_key' };
  }
  return {
    ...decide(p, { organizationId: row.organization_id, role: row.role }, { permission, role }, 'project'),
    projectId: row.id,
  };
}

/** Runs the route's declared access check; null for routes without a target. */
export async function authorizeRoute(
  q: Queryable,
  spec: RouteSpec,
  p: Principal | null,
  input: Record<'params' | 'query' | 'body', unknown>,
): Promise<Access | null> {
  checkScope(p, spec.scope);
  if (!spec.target || !p) return null;
  const id = (input[spec.target.in] as Record<string, unknown> | undefined)?.[spec.target.field];
  if (typeof id !== 'string') throw notFound(spec.target.kind);
  return spec.target.kind === 'organization'
    ? authorizeOrganization(q, p, id, spec.permission, spec.role)
    : authorizeProject(q, p, id, spec.permission, spec.scope, spec.role);
}
