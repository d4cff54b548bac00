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
  /**
   * LISTEN on a channel: `onPayload` gets each notification's payload (NOTIFY is delivered at commit).
   * Resolves once listening, with the function that stops. On a real Postgres this holds one connection
   * of its own, opened at the first call and re-opened (after 1 s) if the server drops it.
   */
  listen(channel: string, onPayload: (payload: string) => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

/** Postgres error codes we act on (https://www.postgresql.org/docs/current/errcodes-appendix.html). */
export const PG_UNIQUE_VIOLATION = '23505';
export const PG_CHECK_VIOLATION = '23514';

export function isPgError(err: unknown, code: string): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === code;
}

/**
 * A statement Postgres aborted only because of what ran beside it: a deadlock (40P01) or a serialization
 * failure (40001). Nothing of it committed, and the same statement run again may well pass.
 */
export function isTransientConflict(err: unknown): boolean {
  return isPgError(err, '40P01') || isPgError(err, '40001');
}

/**
 * A statement that failed because the connection to Postgres did: refused or reset, ended by the server (admin
 * or crash shutdown, 57P01 to 57P03, or any connection exception, class 08), or closed under the client. It may
 * or may not have committed; the same statement on a new connection may well pass once the server is back.
 */
export function isConnectionLoss(err: unknown): boolean {
  if (typeof err !== 'object' || err === null) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string')
    return (
      code.startsWith('08') ||
      code === '57P01' ||
      code === '57P02' ||
      code === '57P03' ||
      code === 'ECONNREFUSED' ||
      code === 'ECONNRESET' ||
      code === 'EPIPE' ||
      code === 'ETIMEDOUT'
    );
  // node-postgres' own errors when the socket ends under a query, which carry no code.
  return /^Connection terminated|connection error and is not queryable/.test(String((err as Error).message));
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

const CHANNEL = /^[a-z_][a-z0-9_]{0,62}$/;

function checkChannel(channel: string): string {
  if (!CHANNEL.test(channel)) throw new TypeError(`not a channel name: ${JSON.stringify(channel)}`);
  return channel;
}

// One connection outside the pool for every LISTEN of a Db: a pooled client would be handed to other
// queries, and its notifications lost when the pool closes it.
function pgListener(url: string) {
  const handlers = new Map<string, Set<(payload: string) => void>>();
  let client: Promise<pg.Client> | null = null;
  let current: pg.Client | null = null;
  let closed = false;

  // Called on 'error', on 'end' and on a failed connect: only the first call for a connection acts.
  function reconnectLater(c: pg.Client) {
    if (c !== current) return;
    current = null;
    client = null;
    c.end().catch(() => {});
    if (closed) return;
    // Notifications sent while disconnected are lost: subscribers catch up from the journal when woken.
    setTimeout(() => {
      if (!closed && handlers.size) connection().catch(() => {});
    }, 1000).unref();
  }

  function connection(): Promise<pg.Client> {
    if (client) return client;
    const c = new pg.Client({ connectionString: url });
    current = c;
    c.on('notification', (msg) => {
      for (const h of handlers.get(msg.channel) ?? []) h(msg.payload ?? '');
    });
    c.on('error', () => reconnectLater(c));
    c.on('end', () => reconnectLater(c));
    const ready = (async () => {
      await c.connect();
      for (const channel of handlers.keys()) await c.query(`LISTEN ${channel}`);
      return c;
    })();
    client = ready;
    ready.catch(() => reconnectLater(c));
    return ready;
  }

  return {
    async listen(channel: string, onPayload: (payload: string) => void) {
      checkChannel(channel);
      if (closed) throw new Error('database closed');
      let set = handlers.get(channel);
      if (!set) handlers.set(channel, (set = new Set()));
      set.add(onPayload);
      const stop = async () => {
        set.delete(onPayload);
        if (set.size || handlers.get(channel) !== set) return;
        handlers.delete(channel);
        const c = await client?.catch(() => null);
        await c?.query(`UNLISTEN ${channel}`).catch(() => {});
      };
      try {
        // LISTEN is idempotent: a connection opened meanwhile has already issued it.
        await (await connection()).query(`LISTEN ${channel}`);
      } catch (err) {
        await stop();
        throw err;
      }
      return stop;
    },
    async close() {
      closed = true;
      const pending = client;
      const c = current;
      current = null;
      client = null;
      await pending?.catch(() => {});
      await c?.end().catch(() => {});
    },
  };
}

/**
 * How long the pool keeps a connection nobody uses: ten minutes, as PgBouncer keeps its server connections, where
 * pg-pool's own is ten seconds. A new connection costs a backend's start and a Parse and first plans of each named
 * statement, and every send after a quiet spell waited for them: on a host under PVM, where a connection costs ~16 ms,
 * the first second's p99 at 64 clients after 15 s idle went from ~120 ms to ~50; where one costs ~2 ms, as on a host
 * under KVM, the gain is within the noise (docs/decisions.md #94).
 */
export const IDLE_CONNECTION_MS = 10 * 60_000;

export function openPostgres(url: string, max = 10): Db {
  const pool = new pg.Pool({ connectionString: url, max, types, idleTimeoutMillis: IDLE_CONNECTION_MS });
  // An idle client's error (server restart) must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  const listener = pgListener(url);
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
      // A checked-out client whose connection breaks (a reset, a server restart) emits 'error', which the pool
      // listens to only while the client is idle: unheard, it would end the process. The query in flight
      // fails with the same error, so nothing more is needed here than to hear it; the broken client is
      // released with it, and the pool drops it instead of reusing it.
      let broken: Error | undefined;
      const onError = (err: Error) => (broken = err);
      client.on('error', onError);
      try {
        await client.query('BEGIN');
        const out = await fn({ query: run(client) });
        await client.query('COMMIT');
        return out;
      } catch (err) {
        if (!broken) await client.query('ROLLBACK').catch(() => {});
        throw err;
      } finally {
        client.off('error', onError);
        client.release(broken);
      }
    },
    listen: listener.listen,
    async close() {
      await listener.close();
      await pool.end();
    },
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
    async listen(channel, onPayload) {
      const stop = await db.listen(checkChannel(channel), onPayload);
      return () => stop();
    },
    close: () => db.close(),
  };
}
