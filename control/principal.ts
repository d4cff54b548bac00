// Who is calling: the result of authentication, one variant per credential kind (spec §5.3).
import type { UserRole } from '../storage/pg/users.js';

export type Principal =
  | { kind: 'account_token'; credentialId: string; keyId: string; userId: string; userRole: UserRole; email: string }
  | { kind: 'platform_admin' };

export type PrincipalOf<K extends Principal['kind']> = Extract<Principal, { kind: K }>;
