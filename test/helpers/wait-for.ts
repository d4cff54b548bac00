// Poll a predicate until it holds or the deadline passes: tests wait on facts, never on sleeps.
import type { Queryable } from '../../storage/pg/client.js';

export async function waitFor<T>(
  check: () => T | Promise<T>,
  { timeoutMs = 10_000, everyMs = 20, what = 'condition' } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Waits until a backend of db's database waits for a lock: a statement blocked on a row another transaction holds. */
export async function waitForLockWait(db: Queryable, what: string): Promise<void> {
  await waitFor(
    async () =>
      (
        await db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity
           WHERE datname = current_database() AND wait_event_type = 'Lock'`,
        )
      )[0]!.n > 0 || null,
    { what },
  );
}
