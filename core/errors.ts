// The closed registry of API error codes (docs/decisions.md #1 plus the codes of docs/api.md §7) and the
// one error value the operations throw. control/errors.ts writes it to the wire as the error envelope.
export const errorStatus = {
  // docs/decisions.md #1: the defaults where the API guide lists no code.
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  unprocessable: 422,
  rate_limited: 429,
  internal: 500,
  // docs/api.md §7 and docs/decisions.md #2 and #3.
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
  readonly code: ErrorCode;
  readonly details?: unknown;
  readonly headers?: Record<string, string>;
  constructor(code: ErrorCode, message: string, details?: unknown, headers?: Record<string, string>) {
    super(message);
    this.code = code;
    this.details = details;
    this.headers = headers;
    this.status = errorStatus[code];
  }
}

export const fail = (code: ErrorCode, message: string, details?: unknown) => new ApiError(code, message, details);

/** A `cursor` that is not the `nextCursor` of this list (docs/api.md §1, "Lists"). */
export const badCursor = () =>
  fail('invalid_request', 'Invalid query: query.cursor is not a cursor of this list.', [
    { field: 'query.cursor', message: 'is not a cursor of this list' },
  ]);
