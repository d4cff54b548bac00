// The OpenAPI 3.1 document, derived from the route table of @svc-mail/sdk (never written by hand); `svc gen`
// writes it to docs/openapi.json.
import { routeTable, type RouteSpec } from '@svc-mail/sdk';
import { errorStatus } from './errors.js';

export function openApiDocument(): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [name, r] of Object.entries(routeTable) as [string, RouteSpec][]) {
    const parameters = [
      ...Object.entries(r.params?.properties ?? {}).map(([n, schema]) => ({
        name: n,
        in: 'path',
        required: true,
        schema,
      })),
      ...Object.entries(r.query?.properties ?? {}).map(([n, schema]) => ({
        name: n,
        in: 'query',
        required: (r.query?.required ?? []).includes(n),
        schema,
      })),
    ];
    (paths[r.path] ??= {})[r.method.toLowerCase()] = {
      operationId: name,
      summary: r.summary,
      security: r.auth === 'public' ? [] : [{ svcHmac: [] }],
      'x-credentials': r.auth,
      ...(r.webmail ? { 'x-webmail': r.webmail } : {}),
      ...(r.permission ? { 'x-permission': r.permission } : {}),
      ...(r.role ? { 'x-role': r.role } : {}),
      ...(r.scope ? { 'x-scope': r.scope } : {}),
      ...(parameters.length ? { parameters } : {}),
      ...(r.body ? { requestBody: { required: true, content: { 'application/json': { schema: r.body } } } } : {}),
      responses: {
        [String(r.status ?? 200)]: { description: 'Success', content: { 'application/json': { schema: r.response } } },
        default: {
          description: 'Error envelope',
          content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } },
        },
      },
    };
  }
  return {
    openapi: '3.1.0',
    info: { title: 'svc-mail control plane', version: '1' },
    paths,
    components: {
      securitySchemes: {
        svcHmac: {
          type: 'apiKey',
          in: 'header',
          name: 'Authorization',
          description: 'SVC-HMAC-SHA256, docs/api.md §5',
        },
      },
      schemas: {
        Error: {
          type: 'object',
          required: ['error'],
          properties: {
            error: {
              type: 'object',
              required: ['code', 'message', 'requestId'],
              properties: {
                code: { type: 'string', enum: Object.keys(errorStatus) },
                message: { type: 'string' },
                details: {},
                requestId: { type: 'string' },
              },
            },
          },
        },
      },
    },
  };
}
