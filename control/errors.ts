// The closed registry of HTTP error codes (gaps-filled.md #1 plus the spec's §7 codes), the one
// error type handlers throw, and the one middleware that writes every error envelope.
import type { Context as KoaContext, Next } from 'koa';
import type { Logger } from 'pino';

export const errorStatus = {
  // gaps-filled.md #1: the defaults where the spec lists no code.
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unprocessable: 422,
  rate_limited: 429,
  internal: 500,
  // Spec §7 and gaps-filled.md #2 and #3.
  invalid_domain: 400,
  cname_not_found: 400,
  invalid_storage_limit: 400,
  mx_record_mismatch: 400,
  already_in_organization: 409,
  custom_domain_taken: 409,
  domain_claim_conflict: 409,
  outbound_already_exists: 409,
  inbound_already_exists: 409,
  idempotency_key_reused: 409,
  apex_not_claimed: 422,
  apex_not_verified: 422,
  sender_domain_not_verified: 422,
  quota_exceeded: 429,
} as const;

export type ErrorCode = keyof typeof errorStatus;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: unknown,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.status = errorStatus[code];
  }
}

export const fail = (code: ErrorCode, message: string, details?: unknown) => new ApiError(code, message, details);

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
