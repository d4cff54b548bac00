// Who is calling: the result of authentication, one variant per credential kind (docs/api.md §5.3).
import type { UserRole } from '../storage/pg/users.js';
import type { Scope } from '@svc-mail/sdk';

export type Principal =
  | { kind: 'account_token'; credentialId: string; keyId: string; userId: string; userRole: UserRole; email: string }
  | { kind: 'organization_token'; credentialId: string; keyId: string; organizationId: string }
  | {
      kind: 'project_api_key';
      credentialId: string;
      keyId: string;
      projectId: string;
      organizationId: string;
      scopes: Scope[];
    }
  | { kind: 'platform_admin' };

export type PrincipalOf<K extends Principal['kind']> = Extract<Principal, { kind: K }>;

/** The audit log's actor columns for a principal. */
export function actorOf(p: Principal | null): { kind: string; id: string | null } {
  switch (p?.kind) {
    case undefined:
      return { kind: 'anonymous', id: null };
    case 'account_token':
      return { kind: p.userRole === 'staff' ? 'staff' : 'user', id: p.userId };
    case 'organization_token':
    case 'project_api_key':
      return { kind: p.kind, id: p.keyId };
    case 'platform_admin':
      return { kind: 'platform_admin', id: null };
  }
}
