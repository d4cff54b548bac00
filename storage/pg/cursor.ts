// Keyset pagination for list routes (docs/api.md §1, "Lists"): a page ends with an opaque `nextCursor` that
// holds the sort key of its last row, and the next page starts after that key. Unlike an offset, a row
// inserted or deleted meanwhile neither repeats nor skips another row, and every page costs one index range.

/** An ORDER BY list whose expressions all go one way, as every list here sorts. */
export interface KeyOrder {
  exprs: string[];
  descending: boolean;
}

export function keyOrder(order: string): KeyOrder {
  const parts = order.split(',').map((p) => p.trim());
  const desc = parts.map((p) => /\s+DESC$/i.test(p));
  if (desc.some((d) => d !== desc[0])) throw new Error(`cursor: mixed directions in ORDER BY ${order}`);
  return { exprs: parts.map((p) => p.replace(/\s+(ASC|DESC)$/i, '')), descending: desc[0]! };
}

/** The select-list items that carry a row's key out with it (as text: timestamps keep their microseconds). */
export const keyColumns = (k: KeyOrder): string => k.exprs.map((e, i) => `(${e})::text AS "__key${i}"`).join(', ');

/**
 * The condition "after the cursor" in the key's direction, with the cursor's values added by `add` (a
 * parameter list's add); the values are typed by the expressions they are compared with.
 */
export const afterCursor = (k: KeyOrder, values: readonly string[], add: (v: unknown) => string): string =>
  `(${k.exprs.join(', ')}) ${k.descending ? '<' : '>'} (${values.map((v) => add(v)).join(', ')})`;

export const encodeCursor = (values: readonly string[]): string =>
  Buffer.from(JSON.stringify(values)).toString('base64url');

/** The key values of a cursor this module wrote for the same order; null for anything else. */
export function decodeCursor(cursor: string, k: KeyOrder): string[] | null {
  if (!/^[A-Za-z0-9_-]{1,2000}$/.test(cursor)) return null;
  try {
    const v: unknown = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    return Array.isArray(v) && v.length === k.exprs.length && v.every((x) => typeof x === 'string') ? v : null;
  } catch {
    return null;
  }
}

/**
 * A page from rows fetched with `limit + 1` and keyColumns: at most `limit` rows without their key columns,
 * and the cursor after the last one when there is more.
 */
export function pageOf<R extends Record<string, unknown>>(
  rows: R[],
  k: KeyOrder,
  limit: number,
): { rows: R[]; nextCursor: string | null } {
  const more = rows.length > limit;
  const page = more ? rows.slice(0, limit) : rows;
  const last = page[page.length - 1];
  const nextCursor = more && last ? encodeCursor(k.exprs.map((_, i) => String(last[`__key${i}`]))) : null;
  for (const r of page) for (let i = 0; i < k.exprs.length; i++) delete r[`__key${i}`];
  return { rows: page, nextCursor };
}

export interface Paged<R> {
  rows: R[];
  nextCursor: string | null;
}

/** The page size and the cursor a list was asked with. */
export interface PageRequest {
  limit: number;
  cursor: string | null;
}

// invalid_text_representation, invalid_datetime_format, datetime_field_overflow, numeric_value_out_of_range: a
// cursor of the right shape whose values are not of the key's types (made up, or of another list).
const BAD_VALUE = new Set(['22P02', '22007', '22008', '22003']);
export const isBadCursorValue = (err: unknown): boolean =>
  typeof err === 'object' && err !== null && BAD_VALUE.has(String((err as { code?: unknown }).code));

/**
 * One page of `SELECT <select> FROM <from> WHERE <where> ORDER BY <order>`, whose parameters are `params` ($1…):
 * the rows after the request's cursor, at most its limit, and the cursor after them; 'bad_cursor' for a cursor
 * that is not one of this list.
 */
export async function pagedRows<R extends Record<string, unknown>>(
  q: { query<T>(sql: string, params?: unknown[]): Promise<T[]> },
  sql: { select: string; from: string; where: string; order: string },
  params: readonly unknown[],
  page: PageRequest,
): Promise<Paged<R> | 'bad_cursor'> {
  const key = keyOrder(sql.order);
  const values = [...params];
  const add = (v: unknown) => `$${values.push(v)}`;
  let where = `(${sql.where})`;
  if (page.cursor !== null) {
    const after = decodeCursor(page.cursor, key);
    if (!after) return 'bad_cursor';
    where += ` AND ${afterCursor(key, after, add)}`;
  }
  let rows: R[];
  try {
    rows = await q.query<R>(
      `SELECT ${sql.select}, ${keyColumns(key)} FROM ${sql.from} WHERE ${where}
       ORDER BY ${sql.order} LIMIT ${add(page.limit + 1)}`,
      values,
    );
  } catch (err) {
    if (page.cursor !== null && isBadCursorValue(err)) return 'bad_cursor';
    throw err;
  }
  return pageOf(rows, key, page.limit);
}
