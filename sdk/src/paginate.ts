// Paging through a list route (docs/api.md §1 rule 6, "Lists"): each answer holds at most `limit` rows, in
// its one array field (`rows`, `messages`, `suppressions`, ...), and `nextCursor`, null on the last page;
// the next page is asked for with `cursor`.

/** A page as every paged list route answers it. */
export type Page = { nextCursor: string | null };

/** The element type of the page's array field. */
export type RowOf<P> = { [K in keyof P]: P[K] extends readonly (infer R)[] ? R : never }[keyof P];

const rowsOf = <P extends Page>(page: P): RowOf<P>[] => {
  const rows: unknown = Object.values(page).find((v) => Array.isArray(v));
  if (!rows) throw new Error('paginate: the answer has no list of rows');
  return rows as RowOf<P>[];
};

/**
 * Every row of a list, page by page, as they come: `list` is an SDK method of a paged route (for example
 * `client.v1.messages.list`), `query` its filters and `limit` (the page size; at most 200).
 *
 *     for await (const m of paginate(client.v1.messages.list, { status: 'bounced' })) console.log(m.id);
 */
export async function* paginate<Q extends { cursor?: string }, P extends Page>(
  list: (query: Q) => Promise<P>,
  query: Omit<Q, 'cursor'> = {} as Omit<Q, 'cursor'>,
): AsyncGenerator<RowOf<P>, void, undefined> {
  let cursor: string | null = null;
  do {
    const page: P = await list({ ...query, ...(cursor ? { cursor } : {}) } as Q);
    yield* rowsOf(page);
    cursor = page.nextCursor;
  } while (cursor);
}

/** Every row of a list in one array (mind the size: a project's messages may be many). */
export async function listAll<Q extends { cursor?: string }, P extends Page>(
  list: (query: Q) => Promise<P>,
  query: Omit<Q, 'cursor'> = {} as Omit<Q, 'cursor'>,
): Promise<RowOf<P>[]> {
  const out: RowOf<P>[] = [];
  for await (const row of paginate(list, query)) out.push(row);
  return out;
}
