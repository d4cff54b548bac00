// GET /openapi.json: the OpenAPI document of the route table (control/openapi.ts, the code `npm run gen` writes
// docs/openapi.json with), unauthenticated like GET /health, with this deployment's SVC_PUBLIC_URL as its server.
// It is not a route of the table: its path is under no product (docs/api.md §1) and it is no SDK method.
// Built at the first request and kept in memory as its JSON text; built again only if the public URL changes
// (the service learns its bound port after the app exists, bin/start.ts).
import { createHash } from 'node:crypto';
import type { Context as KoaContext, Next } from 'koa';
import type { Deps } from '../deps.js';
import { openApiDocument } from '../openapi.js';

export const OPENAPI_PATH = '/openapi.json';

export function openApiEndpoint(deps: Deps) {
  let cached: { url: string; text: string; etag: string } | undefined;
  return async (ctx: KoaContext, next: Next) => {
    if ((ctx.method !== 'GET' && ctx.method !== 'HEAD') || ctx.path !== OPENAPI_PATH) return next();
    ctx.state.route = 'openapi';
    const url = deps.publicUrl();
    if (cached?.url !== url) {
      const text = JSON.stringify(openApiDocument(url ? { serverUrl: url } : {}));
      cached = { url, text, etag: `"${createHash('sha256').update(text).digest('base64url').slice(0, 27)}"` };
    }
    // RFC 9110 §8.8.3: the entity tag lets a client that has the document revalidate it for a 304.
    ctx.status = 200;
    ctx.set('ETag', cached.etag);
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.type = 'application/json';
    if (ctx.fresh) {
      ctx.status = 304;
      return;
    }
    ctx.body = cached.text;
  };
}
