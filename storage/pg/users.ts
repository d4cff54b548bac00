// Users: accounts with a password hash and a platform role (customer or staff).
import { pagedRows, type Paged, type PageRequest } from './cursor.js';
import type { Queryable } from './client.js';
import { isUuid } from '../../mail/uuid.js';

export type UserRole = 'customer' | 'staff';

/** The public shape of a user, as the data layer's `users` allowlist returns it. */
export interface User {
  id: string;
  email: string;
  role: UserRole;
  email_verified_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const PUBLIC = 'id, email, role, email_verified_at, created_at, updated_at';

/** Inserts a user; null when the email (case-insensitive) is taken. */
export async function insertUser(
  q: Queryable,
  u: { id: string; email: string; passwordHash: string; role: UserRole; now: Date },
): Promise<User | null> {
  const rows = await q.query<User>(
    `INSERT INTO users (id, email, password_hash, role, created_at, updated_at)
     VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT DO NOTHING RETURNING ${PUBLIC}`,
    [u.id, u.email, u.passwordHash, u.role, u.now],
  );
  return rows[0] ?? null;
}

export async function findUserWithHashByEmail(
  q: Queryable,
  email: string,
): Promise<(User & { password_hash: string }) | null> {
  const rows = await q.query<User & { password_hash: string }>(
    `SELECT ${PUBLIC}, password_hash FROM users WHERE lower(email) = lower($1)`,
    [email],
  );
  return rows[0] ?? null;
}

export async function findUserWithHash(q: Queryable, id: string): Promise<(User & { password_hash: string }) | null> {
  const rows = await q.query<User & { password_hash: string }>(
    `SELECT ${PUBLIC}, password_hash FROM users WHERE id = $1`,
    [id],
  );
  return rows[0] ?? null;
}

export async function setPasswordHash(q: Queryable, id: string, passwordHash: string, now: Date): Promise<void> {
  await q.query('UPDATE users SET password_hash = $2, updated_at = $3 WHERE id = $1', [id, passwordHash, now]);
}

/** One user without its password hash; null when there is none (or the id is not a uuid). */
export async function getUser(q: Queryable, id: string): Promise<User | null> {
  if (!isUuid(id)) return null;
  const rows = await q.query<User>(`SELECT ${PUBLIC} FROM users WHERE id = $1`, [id]);
  return rows[0] ?? null;
}

/** Users, newest first; `email` narrows to that address (case-insensitive, exact). */
export async function listUsers(
  q: Queryable,
  f: { email?: string | null },
  page: PageRequest,
): Promise<Paged<User> | 'bad_cursor'> {
  return pagedRows<User & Record<string, unknown>>(
    q,
    {
      select: PUBLIC,
      from: 'users',
      where: '$1::text IS NULL OR lower(email) = lower($1)',
      order: 'created_at DESC, id DESC',
    },
    [f.email ?? null],
    page,
  );
}
