// docs/api.md §4.1: the data layer, /v1/<table>/<verb>, generated from ONE registry of tables (`dataTables`
// below). Every table gets `list` and `get`; a write verb exists only where its table enables it, so
// an unknown table, an unknown verb and a write that is not enabled are all simply absent from the
// route table, which the router answers with 404 `not_found` (docs/api.md §4.1 rules 2 and 6).
//
// Adding a table is one entry in `dataTables`: its column allowlist (`row`), whose rows it holds
// (`owner`, turned into the WHERE clause by storage/pg/data-layer.ts), if a project key needs a
// scope to read it, `readScope`, and the exact-match `filters` its list takes. A read-only table
// needs nothing else: no handler, no SQL. Only a column not stored as it is returned, a key other
// than a uuid `id`, an order other than oldest first or a filter not matched as given needs a line
// in that file's TABLE_SQL.
//
// A write is one entry in its table's `writes` (body, response, permission, scope) plus its
// handler in control/handlers/data-layer.ts, which the compiler then requires.
import {
  Type,
  type TArray,
  type TInteger,
  type TNull,
  type TObject,
  type TOptional,
  type TProperties,
  type TSchema,
  type TString,
  type TUnion,
} from '@sinclair/typebox';
import {
  Email,
  Nullable,
  Obj,
  Ok,
  Timestamp,
  type CredentialKind,
  type Permission,
  type RouteSpec,
  type Scope,
} from './types.js';
import { Project, ScopeSchema } from './projects.js';
import { User } from './auth.js';
import { Organization, Role } from './organizations.js';
import {
  Message,
  MessageEventTypeSchema,
  MessageStatusSchema,
  SuppressionReasonSchema,
  WebhookEventSchema,
} from './mail-records.js';
import { WebhookEvents, WebhookUrl } from './webhooks.js';
import { Cursor, Limit } from './types.js';

/**
 * Whose rows a table holds: the column that ties a row to its owner, and what kind of owner
 * that is. storage/pg/data-layer.ts turns it into the WHERE clause of every read.
 */
export type OwnerColumn =
  /** A project: visible to whoever sees the (live) project. */
  | { project: string }
  /** An organization: visible to its members and its organization tokens. */
  | { organization: string }
  /** A user: visible to that user alone. */
  | { user: string }
  /** A credential, by key id: visible to that credential alone. */
  | { credential: string };

/** Whose rows a table holds; with several owners a row is visible when any of them is. */
export type Owner = OwnerColumn | readonly OwnerColumn[];

export type WriteVerb = 'create' | 'update' | 'upsert' | 'delete';

export interface WriteSpec {
  summary: string;
  body: TObject;
  response: TObject;
  /** Credentials accepted; the table's readers unless narrower. */
  auth?: readonly CredentialKind[];
  /**
   * Role permission (docs/api.md §5.5). With `target` the app checks it; without, the handler does once it has
   * found the row.
   */
  permission?: Permission;
  /** Scope a project key needs (docs/api.md §5.3). */
  scope?: Scope;
  target?: RouteSpec['target'];
  status?: 200 | 201;
}

export interface TableSpec {
  /** The column allowlist, snake_case: a read returns exactly these (the schema admits no other). */
  row: TObject;
  /** Whose rows these are, which decides who sees them (docs/api.md §4.1 rule 1). */
  owner: Owner;
  /** Scope a project key needs to read the table (docs/api.md §5.3); other credentials need membership only. */
  readScope?: Scope;
  /**
   * Exact-match filters `list` takes in its query, by row field, with the schema that validates the
   * value. A filter on the field naming the row's project (the `project` owner column) is 404 when
   * that project is not one the caller sees, as a project target is; every other filter only narrows.
   */
  filters?: TProperties;
  /**
   * false: no `get` is generated, because another route already answers /v1/<table>/get with the
   * table's row (messages: docs/api.md §4.11's /v1/messages/get, sdk/src/api/messages.ts). The router
   * cannot hold two routes at one path.
   */
  get?: false;
  writes?: { [V in WriteVerb]?: WriteSpec };
}

/** Every credential may read the data layer; what it sees is its own rows (docs/api.md §4.1 rule 1). */
export const DATA_AUTH: readonly CredentialKind[] = [
  'account_token',
  'organization_token',
  'project_api_key',
  'platform_admin',
];
/** Rows of one's own user (users, account_tokens) are written with one's own account token only. */
const SELF: readonly CredentialKind[] = ['account_token'];

const Id = Type.String({ minLength: 1, maxLength: 200 });
const Label = Type.String({ maxLength: 200 });
const ById = Obj({ id: Id });
const rowOf = <R extends TObject>(row: R) => Type.Object({ row });
/** A minted credential's row carries its secret, this once (docs/api.md §4.1: "return the secret once"). */
const withSecret = <P extends TProperties>(row: TObject<P>) => Obj({ ...row.properties, secret: Type.String() });

// The allowlists. Secrets (secret_sealed), password hashes and token or code hashes are never listed.
const ProjectRow = Obj(Project.properties);
const ApiKeyRow = Obj({
  id: Type.String(),
  key_id: Type.String(),
  project_id: Type.String(),
  label: Nullable(Type.String()),
  scopes: Type.Array(ScopeSchema),
  managed: Type.Union([Type.Literal('platform'), Type.Literal('local')]),
  allowed_cidrs: Type.Array(Type.String()),
  rotated_from: Nullable(Type.String()),
  created_at: Timestamp,
  expires_at: Nullable(Timestamp),
  revoked_at: Nullable(Timestamp),
});
const UserRow = Obj(User.properties);
const AccountTokenRow = Obj({
  id: Type.String(),
  token_id: Type.String(),
  user_id: Type.String(),
  label: Nullable(Type.String()),
  created_at: Timestamp,
  revoked_at: Nullable(Timestamp),
});
const OrganizationRow = Obj(Organization.properties);
const OrganizationMemberRow = Obj({
  /** `<organization_id>:<user_id>`: a membership has no id of its own. */
  id: Type.String(),
  organization_id: Type.String(),
  user_id: Type.String(),
  role: Role,
  created_at: Timestamp,
});
const OrganizationTokenRow = Obj({
  id: Type.String(),
  token_id: Type.String(),
  organization_id: Type.String(),
  label: Nullable(Type.String()),
  created_at: Timestamp,
  revoked_at: Nullable(Timestamp),
});
const AuditLogRow = Obj({
  id: Type.String(),
  created_at: Timestamp,
  actor_kind: Type.String(),
  actor_id: Nullable(Type.String()),
  action: Type.String(),
  method: Type.String(),
  path: Type.String(),
  status: Type.Integer(),
  organization_id: Nullable(Type.String()),
  project_id: Nullable(Type.String()),
  target_id: Nullable(Type.String()),
  request_id: Type.String(),
  ip: Nullable(Type.String()),
});
const SenderDomainRow = Obj({
  id: Type.String(),
  project_id: Type.String(),
  claim_id: Type.String(),
  domain: Type.String(),
  status: Type.String(),
  verified_at: Nullable(Timestamp),
  dkim_selector: Type.String(),
  ed25519_selector: Nullable(Type.String()),
  return_path_subdomain: Type.String(),
  default_display_name: Nullable(Type.String()),
  created_at: Timestamp,
});
const RateLimitRow = Obj({ key: Type.String(), tokens: Type.Number(), allowed: Type.Boolean(), updated_at: Timestamp });
/**
 * docs/decisions.md #4 makes /v1/messages/get "the data-layer read of the messages table" with this
 * row, so the table's list carries the same row (camelCase, unlike the other tables): what list
 * shows, get shows too. The envelope (return path), the idempotency key and the size are not listed.
 */
const MessageRow = Obj(Message.properties);
const MessageEventRow = Obj({
  id: Type.String(),
  message_id: Type.String(),
  project_id: Type.String(),
  type: MessageEventTypeSchema,
  /** What the event adds (the remote SMTP reply of an attempt, a suppression reason), or null. */
  detail: Type.Unknown(),
  created_at: Timestamp,
});
const IdempotencyKeyRow = Obj({
  /** `<project_id>:<key>`: a key is named by its project and itself (docs/decisions.md #3: keys are per project). */
  id: Type.String(),
  project_id: Type.String(),
  key: Type.String(),
  /** The message the first request queued; a repeat within 24 h answers with it. */
  message_id: Type.String(),
  created_at: Timestamp,
  expires_at: Timestamp,
});
const SuppressionRow = Obj({
  id: Type.String(),
  project_id: Type.String(),
  /** The local part as given, the domain in lower case. */
  address: Type.String(),
  reason: SuppressionReasonSchema,
  detail: Nullable(Type.String()),
  created_at: Timestamp,
});
const WebhookEndpointRow = Obj({
  id: Type.String(),
  project_id: Type.String(),
  url: Type.String(),
  /** The kinds subscribed to; empty: every kind (docs/decisions.md #5). */
  events: Type.Array(WebhookEventSchema),
  created_at: Timestamp,
});
const WEBHOOK_DELIVERY_STATUSES = ['pending', 'succeeded', 'retrying', 'failed'] as const;
const WebhookDeliveryStatusSchema = Type.Union(WEBHOOK_DELIVERY_STATUSES.map((s) => Type.Literal(s)));
/** One attempt to deliver one event to one endpoint (docs/api.md §6 rule 3). */
const WebhookDeliveryRow = Obj({
  id: Type.String(),
  /** The Standard Webhooks `webhook-id` header: the same on every attempt of one event to one endpoint. */
  webhook_id: Type.String(),
  endpoint_id: Type.String(),
  project_id: Type.String(),
  /** The message_events row delivered. */
  event_id: Type.String(),
  event_type: WebhookEventSchema,
  attempt: Type.Integer({ minimum: 1 }),
  /** pending (not made yet), succeeded (2xx), retrying (failed; the next attempt is its own row), failed (given up). */
  status: WebhookDeliveryStatusSchema,
  /** The HTTP status answered, null when none was (timeout, connection error). */
  status_code: Nullable(Type.Integer()),
  latency_ms: Nullable(Type.Integer()),
  error: Nullable(Type.String()),
  /** For a pending attempt: when it is due. */
  next_attempt_at: Nullable(Timestamp),
  created_at: Timestamp,
  attempted_at: Nullable(Timestamp),
});
const Uuid = Type.String({ format: 'uuid' });
/** An address as a client writes it; the handler checks it is a mailbox and normalizes it. */
const Address = Type.String({ minLength: 3, maxLength: 320 });

const onProject = { kind: 'project', in: 'body', field: 'id' } as const;

/** THE registry: table name → columns, owner, and the writes docs/api.md §4.1 rule 3 enables. */
export const dataTables = {
  projects: {
    row: ProjectRow,
    owner: { project: 'id' },
    writes: {
      update: {
        summary: 'Rename a project (docs/api.md §4.1 rule 7: body id, name).',
        body: Obj({ id: Id, name: Type.String({ minLength: 1, maxLength: 200 }) }),
        response: rowOf(ProjectRow),
        permission: 'projects:manage',
        scope: 'project:admin',
        target: onProject,
      },
      delete: {
        summary: 'Soft-delete a project, as the console does: it leaves every list and its keys stop working.',
        body: ById,
        response: Ok,
        permission: 'projects:manage',
        scope: 'project:admin',
        target: onProject,
      },
    },
  },
  api_keys: {
    row: ApiKeyRow,
    owner: { project: 'project_id' },
    // docs/api.md §5.3: managing the project's keys is project:admin's, as on the console's key list.
    readScope: 'project:admin',
    // No upsert: a key has no natural key a client could name (key_id is minted by the server).
    writes: {
      create: {
        summary: 'Mint a platform-managed key (tk_) for project_id; the row carries its secret, this once.',
        body: Obj({
          project_id: Id,
          label: Type.Optional(Label),
          scopes: Type.Optional(Type.Array(ScopeSchema, { minItems: 1, uniqueItems: true })),
          allowed_cidrs: Type.Optional(Type.Array(Type.String({ format: 'cidr', maxLength: 64 }), { maxItems: 100 })),
        }),
        response: rowOf(withSecret(ApiKeyRow)),
        status: 201,
        permission: 'apikeys:manage',
        scope: 'project:admin',
        target: { kind: 'project', in: 'body', field: 'project_id' },
      },
      update: {
        summary:
          'Change the label of a live local (svc_) key; the secret and scopes are immutable, and platform-managed ' +
          '(tk_) keys are not renamed (400), as in docs/api.md §4.7.',
        body: Obj({ id: Id, label: Nullable(Label) }),
        response: rowOf(ApiKeyRow),
        permission: 'apikeys:manage',
        scope: 'project:admin',
      },
      delete: {
        summary: 'Revoke a live key: the row stays, with revoked_at set, and the key stops working.',
        body: ById,
        response: Ok,
        permission: 'apikeys:manage',
        scope: 'project:admin',
      },
    },
  },
  users: {
    row: UserRow,
    owner: { user: 'id' },
    writes: {
      update: {
        summary:
          "Change one's own email (docs/api.md §4.1 rule 4): email_verified_at is reset; 409 when the address is " +
          'taken.',
        body: Obj({ id: Id, email: Type.Optional(Email) }),
        response: rowOf(UserRow),
        auth: SELF,
      },
      delete: {
        summary:
          "Delete oneself, irreversibly (docs/api.md §4.1 rule 5): one's account tokens and memberships go, and " +
          'every organization ' +
          'in which one is the only member with all it holds. 409 when one is the only owner of an organization ' +
          'with other ' +
          'members, or when a project to be deleted has sent mail.',
        body: ById,
        response: Ok,
        auth: SELF,
      },
    },
  },
  account_tokens: {
    row: AccountTokenRow,
    owner: { user: 'user_id' },
    writes: {
      create: {
        summary: 'Mint an account token for oneself; the row carries its secret, this once.',
        body: Obj({ label: Type.Optional(Label) }),
        response: rowOf(withSecret(AccountTokenRow)),
        status: 201,
        auth: SELF,
      },
      delete: {
        summary: "Revoke one of one's own account tokens (by id or token_id).",
        body: ById,
        response: Ok,
        auth: SELF,
      },
    },
  },
  organizations: { row: OrganizationRow, owner: { organization: 'id' } },
  organization_members: { row: OrganizationMemberRow, owner: { organization: 'organization_id' } },
  organization_tokens: { row: OrganizationTokenRow, owner: { organization: 'organization_id' } },
  // A row names its organization, its project, or both; docs/api.md §4.10 opens the project's log to
  // project:admin keys.
  audit_log: {
    row: AuditLogRow,
    owner: [{ organization: 'organization_id' }, { project: 'project_id' }],
    readScope: 'project:admin',
  },
  rate_limits: { row: RateLimitRow, owner: { credential: 'key' } },
  // Read-only: sending is set up through the claim and capability routes of docs/api.md §4.5, which
  // replace the earlier per-project sender-domain surface (docs/api.md §9 rule 3).
  sender_domains: { row: SenderDomainRow, owner: { project: 'project_id' }, readScope: 'project:admin' },
  // Read-only: written by sendEmail and the MTA only (docs/api.md §4.1 rule 6). Newest first. Its `get` is
  // the message read of docs/api.md §4.11 (scope messages:read, as here), which answers this same row.
  messages: {
    row: MessageRow,
    owner: { project: 'project_id' },
    readScope: 'messages:read',
    filters: { projectId: Uuid, status: MessageStatusSchema },
    get: false,
  },
  // Read-only engine table (docs/api.md §2.1, §6 rule 1). Newest first; a message's history in order is
  // /v1/messages/events.
  message_events: {
    row: MessageEventRow,
    owner: { project: 'project_id' },
    readScope: 'messages:read',
    filters: { project_id: Uuid, message_id: Uuid, type: MessageEventTypeSchema },
  },
  // Read-only: written by sendEmail (docs/decisions.md #3). The body hash is not listed.
  idempotency_keys: {
    row: IdempotencyKeyRow,
    owner: { project: 'project_id' },
    readScope: 'messages:read',
    filters: { project_id: Uuid },
  },
  // docs/api.md §4.1 rules 3 and 7: create and delete. The MTA adds hard_bounce, soft_bounce_max and
  // complaint rows itself (docs/decisions.md #10); the console's routes (§4.9) are sdk/src/api/suppressions.ts.
  suppressions: {
    row: SuppressionRow,
    owner: { project: 'project_id' },
    readScope: 'suppressions:read',
    // address matches as stored: the domain of the value given is compared in lower case.
    filters: { project_id: Uuid, address: Address, reason: SuppressionReasonSchema },
    writes: {
      create: {
        summary:
          'Suppress an address for project_id (docs/api.md §4.1 rule 7): the local part is kept as given, the ' +
          'domain lower-cased; ' +
          'reason defaults to manual. 409 conflict when the project already suppresses the address.',
        body: Obj({
          project_id: Id,
          address: Address,
          reason: Type.Optional(SuppressionReasonSchema),
          detail: Type.Optional(Nullable(Type.String({ maxLength: 1000 }))),
        }),
        response: rowOf(SuppressionRow),
        status: 201,
        permission: 'projects:manage',
        scope: 'suppressions:write',
        target: { kind: 'project', in: 'body', field: 'project_id' },
      },
      delete: {
        summary: 'Lift a suppression, whatever its reason: mail to the address is sent again.',
        body: ById,
        response: Ok,
        permission: 'projects:manage',
        scope: 'suppressions:write',
      },
    },
  },
  // docs/api.md §4.1 rule 3 and §4.8: the console's webhooks, as rows. Managing them is project:admin's
  // (docs/api.md §5.3), so reading is too, as for api_keys. The secret is in the answer to create, once.
  webhook_endpoints: {
    row: WebhookEndpointRow,
    owner: { project: 'project_id' },
    readScope: 'project:admin',
    filters: { project_id: Uuid },
    writes: {
      create: {
        summary:
          'Register a webhook endpoint for project_id (as POST /console/v1/projects/{id}/webhooks): events empty or ' +
          'absent ' +
          'subscribes to every kind; http(s) and public addresses only; the row carries its whsec_ secret, this once.',
        body: Obj({ project_id: Id, url: WebhookUrl, events: Type.Optional(WebhookEvents) }),
        response: rowOf(withSecret(WebhookEndpointRow)),
        status: 201,
        permission: 'projects:manage',
        scope: 'project:admin',
        target: { kind: 'project', in: 'body', field: 'project_id' },
      },
      // Unknown fields are refused (docs/decisions.md #23), not dropped: a misspelt field must not pass for a change.
      update: {
        summary:
          'Change the url and/or events of a webhook endpoint (absent: kept); its secret stays and is not returned.',
        body: Obj({ id: Id, url: Type.Optional(WebhookUrl), events: Type.Optional(WebhookEvents) }),
        response: rowOf(WebhookEndpointRow),
        permission: 'projects:manage',
        scope: 'project:admin',
      },
      // The natural key is (project_id, url): an endpoint is where its deliveries go.
      upsert: {
        summary:
          "Register the project's endpoint at url, or set the events of the one it has there; the secret is in the " +
          'answer only when the row was inserted.',
        body: Obj({ project_id: Id, url: WebhookUrl, events: Type.Optional(WebhookEvents) }),
        response: rowOf(Obj({ ...WebhookEndpointRow.properties, secret: Type.Optional(Type.String()) })),
        permission: 'projects:manage',
        scope: 'project:admin',
        target: { kind: 'project', in: 'body', field: 'project_id' },
      },
      delete: {
        summary: 'Delete a webhook endpoint, with its delivery attempts: attempts still pending are never made.',
        body: ById,
        response: Ok,
        permission: 'projects:manage',
        scope: 'project:admin',
      },
    },
  },
  // Read-only engine table (docs/api.md §2.1, §6 rule 3): one row per attempt, newest first.
  webhook_deliveries: {
    row: WebhookDeliveryRow,
    owner: { project: 'project_id' },
    readScope: 'project:admin',
    filters: { project_id: Uuid, endpoint_id: Uuid, event_id: Uuid, status: WebhookDeliveryStatusSchema },
  },
} as const satisfies Record<string, TableSpec>;

export type DataTables = typeof dataTables;
export type DataTable = keyof DataTables;

/** docs/decisions.md #6: `limit` has no maximum in the schema; the handler clamps it to 200. */
export const ListQuery = Obj({ limit: Type.Optional(Limit), cursor: Type.Optional(Cursor) });
export const GetQuery = Obj({ id: Id });

type FiltersOf<T extends TableSpec> = T extends { filters: infer F extends TProperties } ? F : Record<never, never>;
type ListQueryOf<T extends TableSpec> = TObject<
  { limit: TOptional<TInteger>; cursor: TOptional<TString> } & {
    [K in keyof FiltersOf<T>]: FiltersOf<T>[K] extends TSchema ? TOptional<FiltersOf<T>[K]> : never;
  }
>;

/** The query of a table's list: `limit` and its filters, all optional. */
function listQueryOf<T extends TableSpec>(t: T): ListQueryOf<T> {
  const filters = Object.entries(t.filters ?? {}).map(([k, schema]) => [k, Type.Optional(schema)]);
  return Obj({ ...ListQuery.properties, ...Object.fromEntries(filters) }) as unknown as ListQueryOf<T>;
}

// The route types, derived from the registry so the SDK knows every method and its row shape.
export interface ReadRoute {
  method: 'GET';
  path: string;
  summary: string;
  auth: readonly CredentialKind[];
  scope?: Scope;
}
type ListRoute<T extends TableSpec> = ReadRoute & {
  query: ListQueryOf<T>;
  response: TObject<{ rows: TArray<T['row']>; nextCursor: TUnion<[TString, TNull]> }>;
};
type GetRoute<T extends TableSpec> = ReadRoute & { query: typeof GetQuery; response: TObject<{ row: T['row'] }> };
type WriteRoute<W extends WriteSpec> = W & { method: 'POST'; path: string; auth: readonly CredentialKind[] };
type WritesOf<T> = T extends { writes: infer W } ? W : Record<never, never>;

type GetRoutes<N extends string, T extends TableSpec> = T extends { get: false }
  ? Record<never, never>
  : { [K in `v1.${N}.get`]: GetRoute<T> };
type RoutesOfTable<N extends string, T extends TableSpec> = { [K in `v1.${N}.list`]: ListRoute<T> } & GetRoutes<
  N,
  T
> & {
    [V in keyof WritesOf<T> & WriteVerb as `v1.${N}.${V}`]: WritesOf<T>[V] extends WriteSpec
      ? WriteRoute<WritesOf<T>[V]>
      : never;
  };
type UnionToIntersection<U> = (U extends unknown ? (x: U) => void : never) extends (x: infer I) => void ? I : never;
type Flatten<T> = { [K in keyof T]: T[K] };
export type DataRoutes<R extends Record<string, TableSpec>> = Flatten<
  UnionToIntersection<{ [N in keyof R & string]: RoutesOfTable<N, R[N]> }[keyof R & string]>
>;

/** The route entries of every table: `v1.<table>.<verb>` ↔ /v1/<table>/<verb> (docs/api.md §1 rule 5). */
export function tableRoutes<R extends Record<string, TableSpec>>(tables: R): DataRoutes<R> {
  const out: Record<string, RouteSpec> = {};
  for (const [name, t] of Object.entries(tables)) {
    const read = { auth: DATA_AUTH, ...(t.readScope ? { scope: t.readScope } : {}) };
    const filters = Object.keys(t.filters ?? {});
    out[`v1.${name}.list`] = {
      method: 'GET',
      path: `/v1/${name}/list`,
      ...read,
      query: listQueryOf(t),
      summary:
        `Rows of ${name} the caller may see, a page at a time (limit: default 50, at most 200; cursor: the ` +
        `nextCursor of the page before)` +
        (filters.length ? `; optionally only those whose ${filters.join(', ')} equal the values given.` : '.'),
      response: Type.Object({ rows: Type.Array(t.row), nextCursor: Nullable(Type.String()) }),
    };
    if (t.get !== false) {
      out[`v1.${name}.get`] = {
        method: 'GET',
        path: `/v1/${name}/get`,
        ...read,
        query: GetQuery,
        summary: `One row of ${name} by id; 404 when the caller may not see it.`,
        response: rowOf(t.row),
      };
    }
    for (const [verb, w] of Object.entries(t.writes ?? {})) {
      out[`v1.${name}.${verb}`] = { method: 'POST', path: `/v1/${name}/${verb}`, auth: DATA_AUTH, ...w };
    }
  }
  return out as unknown as DataRoutes<R>;
}

export const dataLayerRoutes = tableRoutes(dataTables);
