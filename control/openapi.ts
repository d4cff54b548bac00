// The OpenAPI 3.1 document, derived from the route table of @svc-mail/sdk (never written by hand); `svc gen`
// writes it to docs/openapi.json and the control plane serves it at GET /openapi.json (control/middleware/ops.ts)
// with the deployment's own URL in `servers`. `npm run lint:openapi` checks it with Redocly's linter.
import * as sdk from '@svc-mail/sdk';
import { routeTable, DEFAULT_BODY_LIMIT, SCHEME, type RouteSpec } from '@svc-mail/sdk';
import type { TSchema } from '@sinclair/typebox';
import { errorStatus, type ErrorCode } from './errors.js';

/** The committed document's server: a variable for SVC_PUBLIC_URL, defaulting to the default HTTP port. */
const PLACEHOLDER_SERVER = {
  url: '{publicUrl}',
  description: 'The deployment (its SVC_PUBLIC_URL); GET /openapi.json of a running service names its own.',
  variables: { publicUrl: { default: 'http://localhost:8080', description: 'SVC_PUBLIC_URL' } },
};

/**
 * The main resources, as named component schemas: wherever a route's schema embeds one of these (the same
 * TypeBox schema, or one equal to it), the document says `$ref: '#/components/schemas/<Name>'` instead.
 */
const RESOURCES: Record<string, TSchema> = {
  Message: sdk.Message,
  MessageEvent: sdk.MessageEvent,
  SendResult: sdk.SendResult,
  Domain: sdk.DomainClaim,
  OutboundCapability: sdk.OutboundCapability,
  InboundCapability: sdk.InboundCapability,
  Project: sdk.Project,
  ApiKey: sdk.ApiKey,
  Webhook: sdk.Webhook,
  Template: sdk.Template,
  Inbox: sdk.Inbox,
  Organization: sdk.Organization,
  OrganizationToken: sdk.OrgToken,
  User: sdk.User,
  Suppression: sdk.Suppression,
  AuditEntry: sdk.AuditEntry,
  CustomDomain: sdk.CustomDomain,
  Whoami: sdk.Whoami,
};

/** A TypeBox schema as plain JSON (its symbol-keyed marks dropped), for comparing and copying. */
const plain = (s: unknown): string => JSON.stringify(s);

/** Copies `schema`, replacing each embedded resource (but the one at the top, when `self`) by its $ref. */
function withRefs(schema: unknown, byJson: Map<string, string>, self?: string): unknown {
  if (Array.isArray(schema)) return schema.map((s) => withRefs(s, byJson));
  if (typeof schema !== 'object' || schema === null) return schema;
  const o = schema as Record<string, unknown>;
  if (('properties' in o || 'anyOf' in o) && self === undefined) {
    const name = byJson.get(plain(o));
    if (name) return { $ref: `#/components/schemas/${name}` };
  }
  return Object.fromEntries(Object.entries(o).map(([k, v]) => [k, withRefs(v, byJson)]));
}

/** The generic code of a status named in a summary without a code of its own. */
const GENERIC: Partial<Record<number, ErrorCode>> = {
  400: 'invalid_request',
  401: 'unauthorized',
  403: 'forbidden',
  404: 'not_found',
  409: 'conflict',
  413: 'payload_too_large',
  422: 'unprocessable',
  429: 'rate_limited',
};

const isCode = (c: string): c is ErrorCode => Object.prototype.hasOwnProperty.call(errorStatus, c);

/**
 * The error codes a route can answer with (docs/api.md §7), from what the route table says of it: its input
 * (400), its credentials (401, and 429 rate_limited for every signed route: the credential's bucket), its scope,
 * permission or role (403), the organization or project it acts on or an id in its path (404), its body (413,
 * over its bodyLimit), the codes it declares (`errors`) and the statuses and codes its summary names.
 */
export function errorCodesOf(r: RouteSpec): ErrorCode[] {
  const codes = new Set<ErrorCode>();
  if (r.params || r.query || r.body) codes.add('invalid_request');
  const signed = r.auth !== 'public';
  if (signed || r.webmail === 'session') codes.add('unauthorized');
  if (r.scope || r.permission || r.role || r.webmail) codes.add('forbidden');
  if (r.target || Object.keys(r.params?.properties ?? {}).length || r.webmail) codes.add('not_found');
  if (r.body) codes.add('payload_too_large');
  if (signed) codes.add('rate_limited');
  for (const c of r.errors ?? []) {
    if (!isCode(c)) throw new Error(`route ${r.method} ${r.path} declares unknown error code ${c}`);
    codes.add(c);
  }
  for (const word of r.summary.match(/\b[a-z]+(?:_[a-z]+)+\b/g) ?? []) if (isCode(word)) codes.add(word);
  for (const m of r.summary.matchAll(/\b(4\d\d)\b/g)) {
    const status = Number(m[1]);
    const named = [...codes].some((c) => errorStatus[c] === status);
    const generic = GENERIC[status];
    if (!named && generic) codes.add(generic);
  }
  // By status; within one, the generic code first.
  const generic = new Set(Object.values(GENERIC));
  return [...codes].sort(
    (a, b) => errorStatus[a] - errorStatus[b] || Number(generic.has(b)) - Number(generic.has(a)) || a.localeCompare(b),
  );
}

const REASON: Record<number, string> = {
  400: 'The request is invalid',
  401: 'Not authenticated',
  403: 'Not allowed',
  404: 'Not found, or not visible to the caller',
  409: 'Conflict',
  413: 'The body is too large',
  422: 'Cannot be processed',
  429: 'Too many requests',
};

const RETRY_AFTER = {
  description: 'Seconds to wait before trying again (rate_limited).',
  schema: { type: 'integer', minimum: 0 },
};

function errorResponses(r: RouteSpec): Record<string, unknown> {
  const byStatus = new Map<number, ErrorCode[]>();
  for (const c of errorCodesOf(r)) byStatus.set(errorStatus[c], [...(byStatus.get(errorStatus[c]) ?? []), c]);
  const out: Record<string, unknown> = {};
  for (const [status, codes] of byStatus) {
    const limit = status === 413 ? ` (over ${r.bodyLimit ?? DEFAULT_BODY_LIMIT} bytes)` : '';
    out[String(status)] = {
      description: `${REASON[status] ?? 'Error'}${limit}: ${codes.map((c) => `\`${c}\``).join(', ')}.`,
      ...(status === 429 ? { headers: { 'Retry-After': RETRY_AFTER } } : {}),
      content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
      'x-error-codes': codes,
    };
  }
  return out;
}

const SIGNING = [
  'Every route but the public ones is signed (docs/api.md §5). Each request carries:',
  '',
  '```',
  `Authorization: ${SCHEME} Credential=<key id>, Signature=<hex signature>`,
  'X-SVC-Timestamp: <Unix time in milliseconds, within 5 minutes of the server clock>',
  'X-SVC-Nonce: <8 to 128 characters, fresh for every request: a replay is refused>',
  '```',
  '',
  'The signature is the lowercase hex HMAC-SHA-256, keyed with the credential secret, of five lines joined by',
  '"\\n": the method in upper case, the request target as sent (path and query string), the timestamp, the',
  'nonce, and the lowercase hex SHA-256 of the raw body (of the empty string without a body). A key id is a',
  'project key (`tk_…`, `svc_…`), an account token (`svca_…`) or an organization token (`svco_…`). The platform',
  `key is sent as \`Authorization: ${SCHEME} Credential=admin, Signature=bootstrap\` with`,
  '`X-SVC-Admin-Key: <key>`. Any failure is the same 401 `unauthorized`.',
].join('\n');

/** The document; `serverUrl` (a deployment's SVC_PUBLIC_URL) replaces the committed file's placeholder server. */
export function openApiDocument(opts: { serverUrl?: string } = {}): Record<string, unknown> {
  const byJson = new Map(Object.entries(RESOURCES).map(([name, s]) => [plain(s), name]));
  const ref = (s: unknown) => withRefs(s, byJson);
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [name, r] of Object.entries(routeTable) as [string, RouteSpec][]) {
    const parameters = [
      ...Object.entries(r.params?.properties ?? {}).map(([n, schema]) => ({
        name: n,
        in: 'path',
        required: true,
        schema: ref(schema),
      })),
      ...Object.entries(r.query?.properties ?? {}).map(([n, schema]) => ({
        name: n,
        in: 'query',
        required: (r.query?.required ?? []).includes(n),
        schema: ref(schema),
      })),
    ];
    const security = r.auth !== 'public' ? [{ svcHmac: [] }] : r.webmail === 'session' ? [{ webmailSession: [] }] : [];
    (paths[r.path] ??= {})[r.method.toLowerCase()] = {
      operationId: name,
      summary: r.summary,
      security,
      'x-credentials': r.auth,
      ...(r.webmail ? { 'x-webmail': r.webmail } : {}),
      ...(r.permission ? { 'x-permission': r.permission } : {}),
      ...(r.role ? { 'x-role': r.role } : {}),
      ...(r.scope ? { 'x-scope': r.scope } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: ref(r.body) } } } } : {}),
      responses: {
        [String(r.status ?? 200)]: {
          description: 'Success',
          content: { 'application/json': { schema: ref(r.response) } },
        },
        ...errorResponses(r),
        default: {
          description: 'Error envelope (500 `internal`: the log has the details under the request id)',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
    };
  }
  const resources = Object.fromEntries(Object.entries(RESOURCES).map(([n, s]) => [n, withRefs(s, byJson, n)]));
  return {
    openapi: '3.1.0',
    info: {
      title: 'svc-mail control plane',
      version: '1',
      description: 'The HTTP API of svc-mail (docs/api.md), generated from its route table.',
    },
    servers: [opts.serverUrl ? { url: opts.serverUrl } : PLACEHOLDER_SERVER],
    paths,
    components: {
      securitySchemes: {
        svcHmac: { type: 'apiKey', in: 'header', name: 'Authorization', description: SIGNING },
        webmailSession: {
          type: 'apiKey',
          in: 'cookie',
          name: 'svc_webmail',
          description:
            'The webmail session cookie (`__Host-svc_webmail` over HTTPS), set by the webmail sign-in; every ' +
            'change also sends the session CSRF token (docs/api.md §4.15).',
        },
      },
      schemas: {
        Error: {
          type: 'object',
          description: 'The error envelope of every non-2xx answer (docs/api.md §7).',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'requestId'],
              properties: {
                code: { type: 'string', enum: Object.keys(errorStatus) },
                message: { type: 'string' },
                details: {
                  description: 'For invalid_request: each refused field as { field, message } (field like body.to).',
                },
                requestId: { type: 'string' },
              },
            },
          },
        },
        ...resources,
      },
    },
  };
}
