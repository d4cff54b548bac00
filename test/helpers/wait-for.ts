// Poll a predicate until it holds or the deadline passes: tests wait on facts, never on sleeps.
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
