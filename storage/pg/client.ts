// One query interface over a real Postgres (pg.Pool) and the embedded one (PGlite), so that every
// query module and every migration runs unchanged on both.
import { createHash } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import pg from 'pg';
import type { PGlite as PGliteType } from '@electric-sql/pglite';

export interface Queryable {
  query<T = Record<string, unknown>>(sql: string, params?: unknown[]): Promise<T[]>;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'embedded';
  /** Runs fn in one transaction; commits when it resolves, rolls back when it throws. */
  tx<T>(fn: (q: Queryable) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Postgres error codes we act on (https://www.postgresql.org/docs/current/errcodes-appendix.html). */
export const PG_UNIQUE_VIOLATION = '23505';

export function isPgError(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

// int8 and numeric as JS numbers, as PGlite returns them: counters and byte sizes stay far below 2^53.
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20 || oid === 1700) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format);
  },
};

// Named statements are parsed and planned once per connection: the hot path pays for neither again.
const names = new Map<string, string>();
function statementName(sql: string): string {
  let name = names.get(sql);
  if (!name) {
    name = 's' + createHash('sha1').update(sql).digest('hex').slice(0, 16);
    names.set(sql, name);
  }
  return name;
}

export function openPostgres(url: string, max = 10): Db {
  const pool = new pg.Pool({ connectionString: url, max, types });
  // An idle client's error (server restart) must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const run =
    (c: pg.Pool | pg.PoolClient) =>
    async <T>(sql: string, params: unknown[] = []): Promise<T[]> => {
      const res = await c.query({ name: params.length ? statementName(sql) : undefined, text: sql, values: params });
      return res.rows as T[];
    };
  return {
    kind: 'postgres',
    query: run(pool),
    async tx(fn) {
      const client = await pool.connect();
      try {
        await client.query('BEGIN');
        const out = await fn({ query: run(client) });
        await client.query('COMMIT');
        return out;
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.release();
      }
    },
    close: () => pool.end(),
  };
}

export async function openEmbedded(dir: string): Promise<Db> {
  await mkdir(dir, { recursive: true });
  const { PGlite } = await import('@electric-sql/pglite');
  const db: PGliteType = await PGlite.create(dir);
  const run =
    (c: Pick<PGliteType, 'query'>) =>
    async <T>(sql: string, params: unknown[] = []): Promise<T[]> =>
      (await c.query<T>(sql, params)).rows;
  return {
    kind: 'embedded',
    query: run(db),
    // PGlite is a single connection: its transaction() holds a lock so concurrent calls queue up.
    tx: (fn) => db.transaction((t) => fn({ query: run(t) })),
    close: () => db.close(),
  };
}
