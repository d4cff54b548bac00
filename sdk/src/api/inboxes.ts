// docs/api.md §4.5 inboxes under an inbound capability: create, list, delete, storage limit, import, and a new
// password. Served at /console/v1/projects/{id}/inbound/{capId}/inboxes and, like the other capability routes
// (docs/decisions.md #40), at …/domains/{domainId}/inbound/{capId}/inboxes by the same handlers.
import { Type, type TObject } from '@sinclair/typebox';
import { MB, Nullable, Obj, Ok, Timestamp, routes, type RouteSpec } from './types.js';
import { PROJECT_AUTH } from './projects.js';

const byProject = { kind: 'project', in: 'params', field: 'id' } as const satisfies RouteSpec['target'];
const Id = Type.String({ maxLength: 64 });
const base = { auth: PROJECT_AUTH, target: byProject, scope: 'project:admin' } as const;
const write = { ...base, permission: 'domains:manage' } as const;

/** docs/api.md §8: at most 200 messages per import call. */
export const IMPORT_MAX_MESSAGES = 200;
/** 200 messages of ~190 KB each, base64 in JSON (docs/api.md §8); a larger body is 413. */
const IMPORT_BODY_LIMIT = 50 * MB;

const InboxType = Type.Union([Type.Literal('individual'), Type.Literal('group')]);

export const Inbox = Type.Object({
  id: Type.String(),
  capabilityId: Type.String(),
  localpart: Type.String(),
  /** localpart@domain of the capability. */
  address: Type.String(),
  type: InboxType,
  createdAt: Timestamp,
});

export const ListedInbox = Type.Object({
  ...Inbox.properties,
  /** The generated password until the inbox's first login, then null. */
  initialPassword: Nullable(Type.String()),
  storageUsedBytes: Type.Integer(),
  /** limitGb × 2^30 (docs/decisions.md #17); 1 GB unless set. */
  storageLimitBytes: Type.Integer(),
});

export const InboxStorage = Type.Object({ usedBytes: Type.Integer(), limitBytes: Type.Integer() });

export const ImportFolder = Type.Union([
  Type.Literal('inbox'),
  Type.Literal('sent'),
  Type.Literal('drafts'),
  Type.Literal('trash'),
]);

export const ImportFailureReason = Type.Union([
  Type.Literal('not_base64'),
  Type.Literal('empty'),
  Type.Literal('not_a_message'),
  Type.Literal('mailbox_full'),
]);

const ImportMessage = Obj({
  /** The RFC 5322 message, base64 (an entry that is not is counted in `failed`, not refused). */
  raw: Type.String(),
  folder: Type.Optional(ImportFolder),
  /** true sets \Seen. */
  read: Type.Optional(Type.Boolean()),
  /** INTERNALDATE; without it the message's Date field, else the time of import. */
  date: Type.Optional(Timestamp),
});

const capParams = Type.Object({ id: Id, capId: Id });
const inboxParams = Type.Object({ id: Id, capId: Id, inboxId: Id });
const PREFIX = '/console/v1/projects/{id}/inbound/{capId}/inboxes';

const inboxRoutesByCapability = routes({
  'console.projects.inbound.inboxes.create': {
    ...write,
    method: 'POST',
    path: PREFIX,
    status: 201,
    summary:
      'Create an inbox on a verified inbound capability: the generated password is answered once (and listed ' +
      'until the first login). 400 on an unverified capability or an invalid local part; 409 when it exists.',
    params: capParams,
    body: Obj({
      /** An RFC 5321 Dot-string of at most 64 characters; compared without regard to case. */
      localpart: Type.String({ maxLength: 1000 }),
      type: Type.Optional(InboxType),
    }),
    response: Type.Object({ inbox: Inbox, initialPassword: Type.String() }),
  },
  'console.projects.inbound.inboxes.list': {
    ...base,
    method: 'GET',
    path: PREFIX,
    summary: 'The live inboxes of the capability, with initialPassword (null after the first login) and storage.',
    params: capParams,
    response: Type.Object({ inboxes: Type.Array(ListedInbox) }),
  },
  'console.projects.inbound.inboxes.delete': {
    ...write,
    method: 'DELETE',
    path: `${PREFIX}/{inboxId}`,
    summary:
      'Soft-delete the inbox: it stops receiving, its sessions end, its mail is purged and its address can be ' +
      'created again at once; its billed days stay.',
    params: inboxParams,
    response: Ok,
  },
  'console.projects.inbound.inboxes.storage': {
    ...write,
    method: 'POST',
    path: `${PREFIX}/{inboxId}/storage`,
    summary:
      'Set the storage limit: limitGb a whole number 1 to 1024 (GB of 2^30 bytes), else 400 invalid_storage_limit.',
    params: inboxParams,
    // Checked by the operation, not here: every wrong value (0, 1.5, 1025, "2") is invalid_storage_limit.
    body: Obj({ limitGb: Type.Unknown({ description: 'A whole number from 1 to 1024.' }) }),
    response: Type.Object({ storage: InboxStorage }),
  },
  'console.projects.inbound.inboxes.import': {
    ...write,
    method: 'POST',
    path: `${PREFIX}/{inboxId}/import`,
    bodyLimit: IMPORT_BODY_LIMIT,
    summary:
      'Import up to 200 base64 messages (more: 400, nothing imported). A message already in the inbox (by ' +
      'Message-ID, else content hash) is skipped; failures lists each failed entry with its reason.',
    params: inboxParams,
    body: Obj({ messages: Type.Array(ImportMessage, { maxItems: IMPORT_MAX_MESSAGES }) }),
    response: Type.Object({
      total: Type.Integer(),
      imported: Type.Integer(),
      skipped: Type.Integer(),
      failed: Type.Integer(),
      failures: Type.Array(Type.Object({ index: Type.Integer(), reason: ImportFailureReason })),
    }),
  },
  'console.projects.inbound.inboxes.password': {
    ...write,
    method: 'POST',
    path: `${PREFIX}/{inboxId}/password`,
    summary:
      'Issue a new generated password, answered once; the old one stops working and every IMAP and webmail ' +
      'session of the inbox ends.',
    params: inboxParams,
    response: Type.Object({ password: Type.String() }),
  },
});

const nestedCapParams = Type.Object({ id: Id, domainId: Id, capId: Id });
const nestedInboxParams = Type.Object({ id: Id, domainId: Id, capId: Id, inboxId: Id });

/** The nested alias of an inbox route: the claim named in the path as well (docs/decisions.md #40). */
function nested<R extends RouteSpec, P extends TObject>(r: R, params: P): Omit<R, 'params'> & { params: P } {
  return {
    ...r,
    path: r.path.replace('/console/v1/projects/{id}/', '/console/v1/projects/{id}/domains/{domainId}/'),
    params,
    summary: `Alias of ${r.method} ${r.path}.`,
  };
}

const r = inboxRoutesByCapability;
export const inboxRoutes = routes({
  ...r,
  'console.projects.domains.inbound.inboxes.create': nested(
    r['console.projects.inbound.inboxes.create'],
    nestedCapParams,
  ),
  'console.projects.domains.inbound.inboxes.list': nested(r['console.projects.inbound.inboxes.list'], nestedCapParams),
  'console.projects.domains.inbound.inboxes.delete': nested(
    r['console.projects.inbound.inboxes.delete'],
    nestedInboxParams,
  ),
  'console.projects.domains.inbound.inboxes.storage': nested(
    r['console.projects.inbound.inboxes.storage'],
    nestedInboxParams,
  ),
  'console.projects.domains.inbound.inboxes.import': nested(
    r['console.projects.inbound.inboxes.import'],
    nestedInboxParams,
  ),
  'console.projects.domains.inbound.inboxes.password': nested(
    r['console.projects.inbound.inboxes.password'],
    nestedInboxParams,
  ),
});
