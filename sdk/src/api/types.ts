// The shape of one route in THE route table. This folder holds only data and schemas (no server
// code), so the server, the SDK and the OpenAPI document can all be derived from it.
import { Type, type TObject, type TSchema, type Static } from '@sinclair/typebox';

/** Credential kinds a route may accept. `staff` is an account token whose user is platform staff. */
export type CredentialKind = 'account_token' | 'organization_token' | 'project_api_key' | 'platform_admin' | 'staff';
export type Method = 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';

/** docs/api.md §5.5 permission keys. */
export type Permission =
  | 'org:manage'
  | 'billing:manage'
  | 'members:manage'
  | 'tokens:manage'
  | 'domains:manage'
  | 'projects:manage'
  | 'apikeys:manage';

/** docs/api.md §5.3 project key scopes. */
export const SCOPES = [
  'messages:send',
  'messages:read',
  'suppressions:read',
  'suppressions:write',
  'project:admin',
] as const;
export type Scope = (typeof SCOPES)[number];

export interface RouteSpec {
  method: Method;
  /** Path in the spec's form, parameters as {name}. */
  path: string;
  summary: string;
  /** 'public' routes are unsigned (docs/api.md §5); otherwise the credential kinds accepted. */
  auth: 'public' | readonly CredentialKind[];
  /** Role permission a member needs (docs/api.md §5.5); reads declare none and need membership only. */
  permission?: Permission;
  /**
   * The role a member needs, on top of any permission: `owner` where the spec says a route is the
   * owner's (docs/api.md §4.13: template writes). Tokens, staff and the platform key act as for `permission`.
   */
  role?: 'owner';
  /** Scope a project key needs (docs/api.md §5.3). */
  scope?: Scope;
  /**
   * The organization or project the route acts on, and where its id is in the request. The app
   * loads it and checks access before the handler runs: a non-member gets 404, a member whose role
   * lacks `permission` (or is not `role`) 403, a project key without `scope` 403.
   */
  target?: { kind: 'organization' | 'project'; in: 'params' | 'query' | 'body'; field: string };
  params?: TObject;
  query?: TObject;
  body?: TObject;
  response: TSchema;
  /** Success status; 200 unless the spec says otherwise. */
  status?: 200 | 201;
  /** Request body limit in bytes; 1 MB unless the route says otherwise. */
  bodyLimit?: number;
  /**
   * Error codes of docs/api.md §7 the route answers beyond those its input, credentials, scope, permission and
   * target imply (400, 401, 403, 404, 413, 429 rate_limited); the OpenAPI document lists each under its status.
   */
  errors?: readonly string[];
  /** false: a successful call leaves no audit row (only where another record already says it). */

  audit?: false;
  /**
   * A route of the webmail's own API (docs/api.md §4.15), on a webmail host only: 'session' needs the
   * session cookie (and the CSRF token on every change), 'signin' opens a session.
   */
  webmail?: 'session' | 'signin';
}

export const MB = 1024 * 1024;
export const DEFAULT_BODY_LIMIT = MB;

/** Checks a group of routes against RouteSpec while keeping each route's literal type. */
export const routes = <T extends Record<string, RouteSpec>>(r: T): T => r;

type StaticOr<T, D> = T extends TSchema ? Static<T> : D;
// eslint-disable-next-line @typescript-eslint/no-empty-object-type
export interface RouteInput<R extends RouteSpec> {
  params: StaticOr<R['params'], Record<string, never>>;
  query: StaticOr<R['query'], Record<string, never>>;
  body: StaticOr<R['body'], undefined>;
}
export type RouteOutput<R extends RouteSpec> = Static<R['response']>;

// Shared schema pieces. Request objects refuse unknown fields (400 invalid_request naming each one,
// docs/decisions.md #23): a misspelt optional field is never dropped without a word.
export const Obj = <P extends Parameters<typeof Type.Object>[0]>(props: P) =>
  Type.Object(props, { additionalProperties: false });
export const Timestamp = Type.String({ format: 'date-time' });
export const Nullable = <T extends TSchema>(t: T) => Type.Union([t, Type.Null()]);
export const Ok = Type.Object({ ok: Type.Literal(true) });
export const Email = Type.String({ format: 'email', maxLength: 254 });
/** docs/decisions.md #12: at least 10 characters. */
export const NewPassword = Type.String({ minLength: 10, maxLength: 1024 });

/** docs/decisions.md #6: `limit` defaults to 50; values above 200 are clamped (the handler clamps). */
export const LIMIT_DEFAULT = 50;
export const LIMIT_MAX = 200;
export const Limit = Type.Integer({ minimum: 1 });
/** The `nextCursor` of the page before (docs/api.md §1, "Lists"): opaque, for the same list and filters. */
export const Cursor = Type.String({ minLength: 1, maxLength: 2000 });
export const clampLimit = (limit: number | undefined) => Math.min(limit ?? LIMIT_DEFAULT, LIMIT_MAX);
