// Paging through a list route (docs/api.md §1, "Lists"): each answer holds at most `limit` rows and a
// `nextCursor`, null on the last page; the next page is asked for with `cursor`.

/** A page as every paged list route answers it. */
export interface Page<Row> {
  rows: Row[];
  nextCursor: string | null;
}

/**
 * Every row of a list, page by page, as they come: `list` is an SDK method of a paged route (for example
 * `client.v1.messages.list`), `query` its filters and `limit` (the page size; at most 200).
 *
 *     for await (const m of paginate(client.v1.messages.list, { status: 'bounced' })) console.log(m.id);
 */
export async function* paginate<Q extends { cursor?: string }, Row>(
  list: (query: Q) => Promise<Page<Row>>,
  query: Omit<Q, 'cursor'> = {} as Omit<Q, 'cursor'>,
): AsyncGenerator<Row, void, undefined> {
  let cursor: string | null = null;
  do {
    const page: Page<Row> = await list({ ...query, ...(cursor ? { cursor } : {}) } as Q);
    yield* page.rows;
    cursor = page.nextCursor;
  } while (cursor);
}

/** Every row of a list in one array (mind the size: a project's messages may be many). */
export async function listAll<Q extends { cursor?: string }, Row>(
  list: (query: Q) => Promise<Page<Row>>,
  query: Omit<Q, 'cursor'> = {} as Omit<Q, 'cursor'>,
): Promise<Row[]> {
  const out: Row[] = [];
  for await (const row of paginate(list, query)) out.push(row);
  return out;
}
