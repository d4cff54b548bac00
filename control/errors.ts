// The one middleware that writes every error envelope. The closed registry of codes and the error value
// live in core/errors.ts (the operations throw it too) and are re-exported here.
import type { Context as KoaContext, Next } from 'koa';
import type { Logger } from 'pino';
import { ApiError, badCursor, errorStatus, fail, type ErrorCode } from '../core/errors.js';
import { clampLimit } from '@svc-mail/sdk';

export { ApiError, badCursor, errorStatus, fail, type ErrorCode } from '../core/errors.js';

// Errors raised below our code (Koa, the router, the body reader) carry only an HTTP status.
const codeForStatus = (status: number): ErrorCode =>
  (Object.entries(errorStatus).find(([, s]) => s === status)?.[0] as ErrorCode | undefined) ??
  (status >= 500 ? 'internal' : 'invalid_request');

export interface ErrorBody {
  error: { code: ErrorCode; message: string; details?: unknown; requestId: string };
}

/**
 * Outermost middleware: assigns the request id, answers unmatched routes with 404 and turns every
 * thrown value into the envelope. Unexpected exceptions become 500 `internal`; their message and
 * stack go to the log with the request id, never to the client (Koa's `expose` principle).
 */
export function errorEnvelope(log: Logger, newId: () => string) {
  return async (ctx: KoaContext, next: Next) => {
    const requestId = newId();
    ctx.state.requestId = requestId;
    ctx.set('X-Request-Id', requestId);
    try {
      await next();
      if (ctx.status === 404 && ctx.body === undefined) throw fail('not_found', 'No such route.');
    } catch (err) {
      let e: ApiError;
      if (err instanceof ApiError) e = err;
      else {
        const status = (err as { status?: unknown }).status;
        const expose = (err as { expose?: unknown }).expose === true;
        if (typeof status === 'number' && status >= 400 && status < 500 && expose) {
          e = new ApiError(codeForStatus(status), (err as Error).message);
        } else {
          log.error({ err, requestId, method: ctx.method, path: ctx.path }, 'unexpected error');
          e = new ApiError('internal', 'Internal error. Quote the request id when reporting it.');
        }
      }
      ctx.status = e.status;
      for (const [k, v] of Object.entries(e.headers ?? {})) ctx.set(k, v);
      const body: ErrorBody = { error: { code: e.code, message: e.message, requestId } };
      if (e.details !== undefined) body.error.details = e.details;
      ctx.body = body;
    }
  };
}

/**
 * The page size and cursor of a list request (docs/api.md §1 rule 6), and its answer: the page, or 400 for a
 * cursor that is not one of this list.
 */
export const pageRequest = (query: { limit?: number; cursor?: string }) => ({
  limit: clampLimit(query.limit),
  cursor: query.cursor ?? null,
});
export function paged<R>(page: { rows: R[]; nextCursor: string | null } | 'bad_cursor') {
  if (page === 'bad_cursor') throw badCursor();
  return page;
}
