// Numbered, forward-only migrations: storage/pg/migrations/NNNN_name.sql, applied in order, each
// recorded in schema_migrations. A landed file is never edited; a change is a new file.
import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type { Db } from './client.js';

const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), 'migrations');
// Two nodes starting at once must not apply the same migration twice.
const LOCK_KEY = 0x5356_4d49; // "SVMI"

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export async function listMigrations(): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{4}_[\w-]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (f) => ({
      version: Number(f.slice(0, 4)),
      name: f.slice(5, -4),
      sql: await readFile(path.join(dir, f), 'utf8'),
    })),
  );
}

/** Applies every pending migration; returns the names applied. */
export async function migrate(db: Db): Promise<string[]> {
  const all = await listMigrations();
  return db.tx(async (q) => {
    await q.query('SELECT pg_advisory_xact_lock($1)', [LOCK_KEY]);
    await q.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set(
      (await q.query<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => r.version),
    );
    const applied: string[] = [];
    for (const m of all) {
      if (done.has(m.version)) continue;
      // Statements run one by one: the extended protocol (used for params) takes one statement at a time.
      for (const stmt of splitStatements(m.sql)) await q.query(stmt);
      await q.query('INSERT INTO schema_migrations (version, name) VALUES ($1, $2)', [m.version, m.name]);
      applied.push(migrationLabel(m));
    }
    return applied;
  });
}

// Our migrations keep to plain DDL: statements end with ";" at the end of a line, no function bodies.
function splitStatements(sql: string): string[] {
  return sql
    .replace(/^\s*--.*$/gm, '')
    .split(/;\s*$/m)
    .map((s) => s.trim())
    .filter(Boolean);
}

export interface MigrationStatus {
  /** Recorded in schema_migrations, oldest first; `known` is false for a version this code has no file for
   * (the database was migrated by a newer release). */
  applied: { version: number; name: string; appliedAt: Date; known: boolean }[];
  /** Files not yet applied, in the order `migrate` would apply them. */
  pending: { version: number; name: string }[];
}

/** What `migrate` would do, without doing it: reads schema_migrations (absent: nothing applied), writes nothing. */
export async function migrationStatus(db: Db): Promise<MigrationStatus> {
  const all = await listMigrations();
  const [exists] = await db.query<{ t: string | null }>("SELECT to_regclass('schema_migrations')::text AS t");
  const rows = exists?.t
    ? await db.query<{ version: number; name: string; applied_at: Date | string }>(
        'SELECT version, name, applied_at FROM schema_migrations ORDER BY version',
      )
    : [];
  const files = new Set(all.map((m) => m.version));
  const done = new Set(rows.map((r) => r.version));
  return {
    applied: rows.map((r) => ({
      version: r.version,
      name: r.name,
      appliedAt: new Date(r.applied_at),
      known: files.has(r.version),
    })),
    pending: all.filter((m) => !done.has(m.version)).map(({ version, name }) => ({ version, name })),
  };
}

/** `0007_name`, as `migrate` reports what it applied. */
export const migrationLabel = (m: { version: number; name: string }): string =>
  `${String(m.version).padStart(4, '0')}_${m.name}`;
