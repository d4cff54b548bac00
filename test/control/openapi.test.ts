// Issue 17 item 6: GET /openapi.json, unauthenticated, answers the OpenAPI document of the route table with this
// deployment's public URL as its server, the error envelope and the main resources as named components, the
// signing scheme, and every 4xx each operation can answer (control/openapi.ts derives them from the table).
import t from 'tap';
import http from 'node:http';
import { routeTable, type RouteSpec } from '@svc-mail/sdk';
import { startTestService } from '../helpers/service.js';
import { errorCodesOf, openApiDocument } from '../../control/openapi.js';

interface Op {
  operationId: string;
  security: Record<string, string[]>[];
  responses: Record<string, { description: string; content?: unknown; 'x-error-codes'?: string[] }>;
}
interface Doc {
  openapi: string;
  servers: { url: string }[];
  paths: Record<string, Record<string, Op>>;
  components: {
    schemas: Record<string, { properties?: Record<string, unknown> }>;
    securitySchemes: Record<string, { type: string; in: string; name: string; description?: string }>;
  };
}

const svc = await startTestService(t);

t.test('GET /openapi.json: unauthenticated, the document with this service as its server', async (t) => {
  const res = await fetch(`${svc.url}/openapi.json`);
  t.equal(res.status, 200);
  t.match(res.headers.get('content-type'), /^application\/json/);
  t.ok(res.headers.get('x-request-id'), 'inside the envelope middleware: a request id');
  const doc = (await res.json()) as Doc;
  t.equal(doc.openapi, '3.1.0');
  t.same(doc.servers, [{ url: svc.url }], 'servers: SVC_PUBLIC_URL (here the bound address)');

  const error = doc.components.schemas.Error;
  t.ok(error, 'components.schemas.Error');
  t.same(Object.keys(error?.properties ?? {}), ['error']);
  for (const name of ['Message', 'Domain', 'Project', 'ApiKey', 'Webhook', 'Template', 'Inbox', 'SendResult'])
    t.ok(doc.components.schemas[name], `components.schemas.${name}`);

  const hmac = doc.components.securitySchemes.svcHmac;
  t.match(hmac, { type: 'apiKey', in: 'header', name: 'Authorization' });
  t.match(hmac?.description, /SVC-HMAC-SHA256 Credential=<key id>, Signature=<hex signature>/);
  t.match(hmac?.description, /X-SVC-Timestamp/);
  t.match(hmac?.description, /X-SVC-Nonce/);
  t.match(hmac?.description, /X-SVC-Admin-Key/);

  const send = doc.paths['/v1/services/sendEmail']?.post;
  t.equal(send?.operationId, 'v1.services.sendEmail');
  t.same(send?.security, [{ svcHmac: [] }]);
  for (const status of ['400', '401', '403', '409', '413', '422', '429']) {
    const r = send?.responses[status];
    t.ok(r, `sendEmail lists ${status}`);
    t.same(r?.content, { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } }, `${status}: Error`);
  }
  t.same(send?.responses['409']?.['x-error-codes'], ['idempotency_key_reused']);
  t.same(send?.responses['422']?.['x-error-codes'], ['sender_domain_not_verified']);
  t.same(send?.responses['429']?.['x-error-codes'], ['rate_limited', 'quota_exceeded']);
  t.same(
    (send?.responses['200'] as { content?: unknown }).content,
    { 'application/json': { schema: { $ref: '#/components/schemas/SendResult' } } },
    'the answer by its component',
  );

  const health = doc.paths['/health']?.get;
  t.same(health?.security, [], '/health is public');
  t.same(
    Object.keys(health?.responses ?? {}).filter((s) => s.startsWith('4')),
    [],
    'a public route without input answers no 4xx',
  );

  // Served from memory, revalidated by its entity tag.
  const etag = res.headers.get('etag');
  t.ok(etag, 'an ETag');
  // node:http, not fetch: fetch makes a request with If-None-Match `Cache-Control: no-cache`, never answered 304.
  const again = await new Promise<number>((resolve, reject) =>
    http
      .get(`${svc.url}/openapi.json`, { headers: { 'if-none-match': etag! } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      })
      .on('error', reject),
  );
  t.equal(again, 304, 'If-None-Match: 304');
  const post = await fetch(`${svc.url}/openapi.json`, { method: 'POST' });
  t.equal(post.status, 404, 'GET only');
});

t.test('the committed document and the served one differ only in servers', async (t) => {
  const served = (await (await fetch(`${svc.url}/openapi.json`)).json()) as Doc;
  const committed = openApiDocument() as unknown as Doc;
  t.match(committed.servers, [{ url: '{publicUrl}' }], 'the committed file: a server variable');
  t.same({ ...served, servers: [] }, { ...committed, servers: [] });
});

t.test('4xx of each operation, from what the route table says of it', async (t) => {
  const r = (over: Partial<RouteSpec>): RouteSpec => ({
    method: 'GET',
    path: '/x',
    summary: 'x',
    auth: 'public',
    response: { type: 'object' } as never,
    ...over,
  });
  t.same(errorCodesOf(r({})), [], 'public, no input: none');
  t.same(errorCodesOf(r({ auth: ['account_token'] })), ['unauthorized', 'rate_limited'], 'signed: 401 and 429');
  t.same(errorCodesOf(r({ auth: ['project_api_key'], scope: 'messages:read', query: { type: 'object' } as never })), [
    'invalid_request',
    'unauthorized',
    'forbidden',
    'rate_limited',
  ]);
  t.same(
    errorCodesOf(
      r({
        method: 'DELETE',
        path: '/x/{id}',
        auth: ['account_token'],
        params: { type: 'object', properties: { id: {} } } as never,
      }),
    ),
    ['invalid_request', 'unauthorized', 'not_found', 'rate_limited'],
    'an id in the path: 404',
  );
  t.same(errorCodesOf(r({ summary: 'Revoke it; 409 if it was already used.' })), ['conflict'], '409 named: conflict');
  t.same(
    errorCodesOf(r({ summary: 'Claim. 409 domain_claim_conflict.' })),
    ['domain_claim_conflict'],
    'a code named: that code, not the generic one',
  );
  t.same(errorCodesOf(r({ method: 'POST', body: { type: 'object' } as never })), [
    'invalid_request',
    'payload_too_large',
  ]);
  t.throws(() => errorCodesOf(r({ errors: ['no_such_code'] })), /unknown error code no_such_code/);
  // Every route of the table: signed ones answer 401 and 429; those with a scope or permission 403.
  for (const [name, spec] of Object.entries(routeTable) as [string, RouteSpec][]) {
    const codes = errorCodesOf(spec);
    if (spec.auth !== 'public') t.ok(codes.includes('unauthorized') && codes.includes('rate_limited'), name);
    if (spec.scope || spec.permission) t.ok(codes.includes('forbidden'), `${name}: 403`);
  }
});
