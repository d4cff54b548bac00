// Handlers of the data layer (docs/api.md §4.1). Reads are one generic pair for every table of the registry
// (sdk/src/api/data-layer.ts); each enabled write has its handler below, and the compiler refuses a
// write entry without one. Row visibility is the WHERE clause of storage/pg/data-layer.ts.
import type { Static } from '@sinclair/typebox';
import {
  dataTables,
  type DataTable,
  type DataTables,
  type TableSpec,
  type WriteSpec,
  type WriteVerb,
  type dataLayerRoutes,
  clampLimit,
} from '@svc-mail/sdk';
import type { Handler, Handlers, RequestCtx } from '../deps.js';
import type { Principal, PrincipalOf } from '../principal.js';
import { badCursor, fail } from '../errors.js';
import { authorizeProject } from '../authorize.js';
import { mintAccountToken } from '../../core/tokens.js';
import { projectJson } from './projects.js';
import { DEFAULT_SCOPES, mintProjectKey } from '../../core/projects.js';
import { normalizeMailbox } from '../../mail/compose.js';
import type { Queryable } from '../../storage/pg/client.js';
import { renameProject, softDeleteProject } from '../../storage/pg/projects.js';
import { renameApiKey, revokeApiKey } from '../../storage/pg/api-keys.js';
import { revokeToken } from '../../storage/pg/tokens.js';
import { deleteSuppression, insertSuppression } from '../../storage/pg/suppressions.js';
import { deleteWebhookEndpoint } from '../../storage/pg/webhooks.js';
import { changeWebhook, registerWebhook, upsertWebhook } from '../../core/webhooks.js';
import { MAX_WEBHOOKS_PER_PROJECT } from '@svc-mail/sdk';
import {
  deleteUserCascade,
  getRow,
  listRows,
  updateUserEmail,
  type Row,
  type TableRead,
  type Viewer,
} from '../../storage/pg/data-layer.js';

type Routes = typeof dataLayerRoutes;
type RowOf<T extends DataTable> = Static<DataTables[T]['row']>;

/** docs/api.md §4.1 rule 1: what the calling credential sees. Staff and the platform key see every row. */
function viewerOf(p: Principal | null): Viewer {
  switch (p?.kind) {
    case undefined:
      throw new Error('the data layer reached without a principal');
    case 'platform_admin':
      return { kind: 'all' };
    case 'account_token':
      return p.userRole === 'staff' ? { kind: 'all' } : { kind: 'user', userId: p.userId, keyId: p.keyId };
    case 'organization_token':
      return { kind: 'organization', organizationId: p.organizationId, keyId: p.keyId };
    case 'project_api_key':
      return { kind: 'project', projectId: p.projectId, keyId: p.keyId };
  }
}

/** Writes to one's own user rows (users, account_tokens) see only those, staff included. */
const selfOf = (p: PrincipalOf<'account_token'>): Viewer => ({ kind: 'user', userId: p.userId, keyId: p.keyId });

function accountOf(rc: RequestCtx): PrincipalOf<'account_token'> {
  if (rc.principal?.kind !== 'account_token')
    throw new Error('a self-only data-layer route reached without an account token');
  return rc.principal;
}

const tableRead = (table: DataTable): TableRead => ({
  table,
  columns: Object.keys(dataTables[table].row.properties),
  owner: dataTables[table].owner,
});

/** Timestamps as ISO 8601; every other column is already JSON. */
const json = (row: Row): Row =>
  Object.fromEntries(Object.entries(row).map(([k, v]) => [k, v instanceof Date ? v.toISOString() : v]));

/** The row as the viewer sees it, or 404: a row not visible and a row that does not exist look the same. */
async function visibleRow<T extends DataTable>(q: Queryable, table: T, viewer: Viewer, id: string): Promise<RowOf<T>> {
  const row = await getRow(q, tableRead(table), viewer, id);
  if (!row) throw fail('not_found', `No such row in ${table}.`);
  return json(row) as RowOf<T>;
}

/** A key the caller may see that still works (not revoked, not past a rotation's grace window), or 404. */
async function liveKey(rc: RequestCtx, id: string): Promise<RowOf<'api_keys'>> {
  const key = await visibleRow(rc.deps.storage.db, 'api_keys', viewerOf(rc.principal), id);
  if (key.revoked_at !== null || (key.expires_at !== null && Date.parse(key.expires_at) <= rc.now.getTime())) {
    throw fail('not_found', 'No such live key in api_keys.');
  }
  return key;
}

/** A write of the registry, as [table, verb]. */
type RowWrite = {
  [T in DataTable]: DataTables[T] extends { writes: infer W } ? [T, keyof W & WriteVerb] : never;
}[DataTable];

/**
 * The role check of a write on a row of a project, made once the row (and so its project) is
 * known: 403 for a member whose role lacks the permission (docs/api.md §5.4 rule 2). The audit row names
 * the project and `targetId`.
 */
async function authorizeRowWrite(
  rc: RequestCtx,
  [table, verb]: RowWrite,
  projectId: string,
  targetId: string,
): Promise<void> {
  const w = (dataTables[table].writes as Record<string, WriteSpec>)[verb] as WriteSpec;
  const principal = rc.principal;
  if (!principal) throw new Error('a data-layer write reached without a principal');
  const access = await authorizeProject(rc.deps.storage.db, principal, projectId, w.permission, w.scope);
  rc.audit.projectId = access.projectId;
  rc.audit.organizationId = access.organizationId;
  rc.audit.targetId = targetId;
}

type WriteName = { [K in keyof Routes]: K extends `v1.${string}.${WriteVerb}` ? K : never }[keyof Routes];

const writeHandlers: { [K in WriteName]: Handler<Routes[K]> } = {
  // The route's target check (body.id) found the project visible and the caller allowed.
  async 'v1.projects.update'({ body }, rc) {
    const project = await renameProject(rc.deps.storage.db, body.id, body.name, rc.now);
    if (!project) throw fail('not_found', 'No such row in projects.');
    rc.audit.targetId = project.id;
    return { row: projectJson(project) };
  },

  async 'v1.projects.delete'({ body }, rc) {
    if (!(await softDeleteProject(rc.deps.storage.db, body.id, rc.now)))
      throw fail('not_found', 'No such row in projects.');
    rc.audit.targetId = body.id;
    return { ok: true as const };
  },

  // The route's target check (body.project_id) found the project visible and the caller allowed.
  async 'v1.api_keys.create'({ body }, rc) {
    const projectId = rc.access?.projectId;
    if (!projectId) throw new Error('v1.api_keys.create reached without its project target');
    const { db, sealer } = rc.deps.storage;
    return db.tx(async (q) => {
      const key = await mintProjectKey(q, sealer, {
        projectId,
        label: body.label ?? null,
        scopes: body.scopes ?? DEFAULT_SCOPES,
        allowedCidrs: body.allowed_cidrs ?? [],
        now: rc.now,
      });
      rc.audit.targetId = key.keyId;
      const row = await visibleRow(q, 'api_keys', viewerOf(rc.principal), key.id);
      return { row: { ...row, secret: key.secret } };
    });
  },

  async 'v1.api_keys.update'({ body }, rc) {
    const key = await liveKey(rc, body.id);
    await authorizeRowWrite(rc, ['api_keys', 'update'], key.project_id, key.key_id);
    if (key.managed === 'platform')
      throw fail('invalid_request', 'Platform-managed (tk_) keys cannot be renamed; rotate or revoke them.');
    await renameApiKey(rc.deps.storage.db, key.id, body.label);
    return { row: await visibleRow(rc.deps.storage.db, 'api_keys', viewerOf(rc.principal), key.id) };
  },

  async 'v1.api_keys.delete'({ body }, rc) {
    const key = await liveKey(rc, body.id);
    await authorizeRowWrite(rc, ['api_keys', 'delete'], key.project_id, key.key_id);
    await revokeApiKey(rc.deps.storage.db, key.id, rc.now);
    return { ok: true as const };
  },

  async 'v1.users.update'({ body }, rc) {
    const me = accountOf(rc);
    const { db } = rc.deps.storage;
    const user = await visibleRow(db, 'users', selfOf(me), body.id);
    rc.audit.targetId = user.id;
    if (body.email === undefined) return { row: user };
    const outcome = await updateUserEmail(db, user.id, body.email.trim(), rc.now);
    if (outcome === 'taken') throw fail('conflict', 'Another account uses this email.');
    if (outcome === 'not_found') throw fail('not_found', 'No such row in users.');
    return { row: await visibleRow(db, 'users', selfOf(me), user.id) };
  },

  async 'v1.users.delete'({ body }, rc) {
    const me = accountOf(rc);
    const { db } = rc.deps.storage;
    const user = await visibleRow(db, 'users', selfOf(me), body.id);
    const outcome = await db.tx((q) => deleteUserCascade(q, user.id));
    if (!outcome.ok) {
      switch (outcome.reason) {
        case 'not_found':
          throw fail('not_found', 'No such row in users.');
        case 'only_owner':
          throw fail(
            'conflict',
            'You are the only owner of an organization that has other members; make another member owner first.',
            {
              organizationId: outcome.organizationId,
            },
          );
        case 'sent_mail':
          throw fail('conflict', 'A project that would be deleted has sent mail; such an account cannot be deleted.');
      }
    }
    rc.audit.targetId = user.id;
    return { ok: true as const };
  },

  async 'v1.account_tokens.create'({ body }, rc) {
    const me = accountOf(rc);
    const { db, sealer } = rc.deps.storage;
    const token = await mintAccountToken(db, sealer, { userId: me.userId, label: body.label ?? null, now: rc.now });
    rc.audit.targetId = token.tokenId;
    const row = await visibleRow(db, 'account_tokens', selfOf(me), token.id);
    return { row: { ...row, secret: token.secret } };
  },

  // The route's target check (body.project_id) found the project visible and the caller allowed.
  async 'v1.suppressions.create'({ body }, rc) {
    const projectId = rc.access?.projectId;
    if (!projectId) throw new Error('v1.suppressions.create reached without its project target');
    // Stored as sendEmail looks recipients up: the local part as given, the domain in lower case.
    const address = normalizeMailbox(body.address);
    if (!address)
      throw fail('invalid_request', 'address is not a valid address.', [
        { field: 'body.address', message: 'is not a valid address' },
      ]);
    const { db } = rc.deps.storage;
    const added = await insertSuppression(db, {
      projectId,
      address,
      reason: body.reason ?? 'manual',
      detail: body.detail ?? null,
      now: rc.now,
    });
    if (!added.inserted) {
      throw fail(
        'conflict',
        `The project already suppresses ${address}.`,
        added.id ? { id: added.id, address } : { address },
      );
    }
    rc.audit.targetId = address;
    return { row: await visibleRow(db, 'suppressions', viewerOf(rc.principal), added.id) };
  },

  async 'v1.suppressions.delete'({ body }, rc) {
    const { db } = rc.deps.storage;
    const row = await visibleRow(db, 'suppressions', viewerOf(rc.principal), body.id);
    await authorizeRowWrite(rc, ['suppressions', 'delete'], row.project_id, row.address);
    if (!(await deleteSuppression(db, row.id))) throw fail('not_found', 'No such row in suppressions.');
    return { ok: true as const };
  },

  // The route's target check (body.project_id) found the project visible and the caller allowed.
  async 'v1.webhook_endpoints.create'({ body }, rc) {
    const projectId = rc.access?.projectId;
    if (!projectId) throw new Error('v1.webhook_endpoints.create reached without its project target');
    const { endpoint, secret } = await registerWebhook(rc.deps, {
      projectId,
      url: body.url,
      events: body.events,
      max: MAX_WEBHOOKS_PER_PROJECT,
      now: rc.now,
      field: 'body.url',
    });
    rc.audit.targetId = endpoint.id;
    const row = await visibleRow(rc.deps.storage.db, 'webhook_endpoints', viewerOf(rc.principal), endpoint.id);
    return { row: { ...row, secret } };
  },

  async 'v1.webhook_endpoints.update'({ body }, rc) {
    const { db } = rc.deps.storage;
    const row = await visibleRow(db, 'webhook_endpoints', viewerOf(rc.principal), body.id);
    await authorizeRowWrite(rc, ['webhook_endpoints', 'update'], row.project_id, row.id);
    const patch = { url: body.url, events: body.events };
    await changeWebhook(rc.deps, row.project_id, row.id, patch, 'body.url');
    return { row: await visibleRow(db, 'webhook_endpoints', viewerOf(rc.principal), row.id) };
  },

  // The route's target check (body.project_id) found the project visible and the caller allowed.
  async 'v1.webhook_endpoints.upsert'({ body }, rc) {
    const projectId = rc.access?.projectId;
    if (!projectId) throw new Error('v1.webhook_endpoints.upsert reached without its project target');
    const { endpoint, secret } = await upsertWebhook(rc.deps, {
      projectId,
      url: body.url,
      events: body.events,
      max: MAX_WEBHOOKS_PER_PROJECT,
      now: rc.now,
      field: 'body.url',
    });
    rc.audit.targetId = endpoint.id;
    const row = await visibleRow(rc.deps.storage.db, 'webhook_endpoints', viewerOf(rc.principal), endpoint.id);
    return { row: secret === null ? row : { ...row, secret } };
  },

  async 'v1.webhook_endpoints.delete'({ body }, rc) {
    const { db } = rc.deps.storage;
    const row = await visibleRow(db, 'webhook_endpoints', viewerOf(rc.principal), body.id);
    await authorizeRowWrite(rc, ['webhook_endpoints', 'delete'], row.project_id, row.id);
    if (!(await deleteWebhookEndpoint(db, row.project_id, row.id)))
      throw fail('not_found', 'No such row in webhook_endpoints.');
    return { ok: true as const };
  },

  async 'v1.account_tokens.delete'({ body }, rc) {
    const me = accountOf(rc);
    // Own tokens only, staff included: the UPDATE is keyed by the caller's user id.
    if (!(await revokeToken(rc.deps.storage.db, 'account', me.userId, body.id, rc.now)))
      throw fail('not_found', 'No such row in account_tokens.');
    rc.audit.targetId = body.id;
    return { ok: true as const };
  },
};

type ReadHandler = (
  input: { query: { limit?: number; id?: string } & Record<string, unknown> },
  rc: RequestCtx,
) => Promise<unknown>;

/** list and get of every table, from the registry alone. */
function readHandlers(): Record<string, ReadHandler> {
  const out: Record<string, ReadHandler> = {};
  for (const table of Object.keys(dataTables) as DataTable[]) {
    const spec: TableSpec = dataTables[table];
    out[`v1.${table}.list`] = async ({ query }, rc) => {
      const { limit, cursor, ...rest } = query;
      // The route's schema admits the table's filters and nothing else (unknown ones are refused by the validator).
      const filters = Object.fromEntries(
        Object.keys(spec.filters ?? {})
          .filter((f) => rest[f] !== undefined)
          .map((f) => [f, rest[f]]),
      );
      const page = await listRows(
        rc.deps.storage.db,
        tableRead(table),
        viewerOf(rc.principal),
        clampLimit(limit),
        filters,
        typeof cursor === 'string' ? cursor : null,
      );
      if (!page) throw fail('not_found', 'No such project.');
      if (page === 'bad_cursor') throw badCursor();
      return { rows: page.rows.map(json), nextCursor: page.nextCursor };
    };
    if (spec.get !== false) {
      out[`v1.${table}.get`] = async ({ query }, rc) => ({
        row: await visibleRow(rc.deps.storage.db, table, viewerOf(rc.principal), query.id ?? ''),
      });
    }
  }
  return out;
}

// The read handlers' row types are the registry's schemas, checked against every response in tests.
export const dataLayerHandlers = { ...readHandlers(), ...writeHandlers } as unknown as Handlers<Routes>;
