// Builds the Koa app from the route table: one pipeline for every route (body → authentication and
// rate limit → JSON → validation → handler → response), so no route re-implements any step.
// The app never listens; control/server.ts does.
import { randomUUID } from 'node:crypto';
import Koa from 'koa';
import Router from '@koa/router';
import { routeTable, DEFAULT_BODY_LIMIT, type RouteSpec } from '@svc-mail/sdk';
import { errorEnvelope } from './errors.js';
import { bodyReader, parseJson } from './middleware/body.js';
import { checkHead, completeAuthentication } from './middleware/authenticate.js';
import { compileRequest, compileResponse } from './middleware/validate.js';
import { handlers } from './handlers/index.js';
import type { Deps, Handler, RequestCtx } from './deps.js';
import { authorizeRoute } from './authorize.js';
import { actorOf } from './principal.js';
import { insertAudit } from '../storage/pg/audit.js';
import { gateWebmail } from './webmail/gate.js';
import { webmailPages } from './webmail/pages.js';
import { clientAddress, networks } from '../mail/client-address.js';
import type { Registry } from 'prom-client';
import { accessLog, opsEndpoints, type Scrape } from './middleware/ops.js';
import { openApiEndpoint } from './middleware/openapi.js';

export interface AppOptions {
  /** Check every response against its schema (tests); a mismatch is a 500 and a log line. */
  checkResponses?: boolean;
  /** The service's metrics Registry: HTTP metrics are counted on it and GET /metrics serves it. */
  metrics?: Registry;
  /** What GET /metrics serves instead of `metrics` (the whole cluster's sum, in a worker process). */
  scrape?: Scrape;
}

/**
 * Registration order: at the first segment where two paths differ, a literal segment comes before a
 * parameter, so /organizations/roles is matched before /organizations/{id}.
 */
export function byPathSpecificity(a: string, b: string): number {
  const sa = a.split('/');
  const sb = b.split('/');
  for (let i = 0; i < Math.min(sa.length, sb.length); i++) {
    const pa = (sa[i] ?? '').startsWith('{');
    const pb = (sb[i] ?? '').startsWith('{');
    if (pa !== pb) return pa ? 1 : -1;
    if (sa[i] !== sb[i]) return (sa[i] ?? '') < (sb[i] ?? '') ? -1 : 1;
  }
  return sa.length - sb.length;
}

/** {name} → :name, the router's parameter syntax. */
export const koaPath = (path: string) => path.replace(/\{(\w+)\}/g, ':$1');

export function createApp(deps: Deps, opts: AppOptions = {}): Koa {
  const app = new Koa();
  // The source address comes from the socket; a proxy in front is believed only when the operator names it
  // (SVC_TRUSTED_PROXIES, the middleware below), never from Koa's app.proxy, which believes any client.
  app.proxy = false;
  app.silent = true;
  const router = new Router();
  // Routes whose path has no parameter, by method and path as written in the route table: the router tests each
  // of its ~120 paths' regular expressions in turn for every request (~11 µs, about 1% of a sendEmail's CPU),
  // this is one Map lookup. Anything else (a parameter, another case, a trailing slash, HEAD) is the router's, as
  // before; a path that is in the Map is the router's first match too, since a literal segment sorts before a
  // parameter.
  const exact = new Map<string, (ctx: Koa.Context) => Promise<void>>();
  const bodies = bodyReader(deps.ctx.config.httpMaxLargeBodies);

  const names = Object.keys(routeTable).sort((a, b) =>
    byPathSpecificity(routeTable[a as keyof typeof routeTable].path, routeTable[b as keyof typeof routeTable].path),
  );
  const missing = names.filter((n) => !(n in handlers));
  const extra = Object.keys(handlers).filter((n) => !(n in routeTable));
  if (missing.length || extra.length)
    throw new Error(`route table and handlers disagree: missing ${missing} extra ${extra}`);

  for (const name of names) {
    const spec = routeTable[name as keyof typeof routeTable] as RouteSpec;
    const handler = handlers[name as keyof typeof handlers] as unknown as Handler<RouteSpec>;
    const check = {
      params: spec.params ? compileRequest('params', spec.params) : null,
      query: spec.query ? compileRequest('query', spec.query) : null,
      body: spec.body ? compileRequest('body', spec.body) : null,
      response: opts.checkResponses ? compileResponse(spec.response) : null,
    };
    const limit = spec.bodyLimit ?? DEFAULT_BODY_LIMIT;

    const route = async (ctx: Koa.Context) => {
      // The route's name labels its metrics and access log line (control/middleware/ops.ts).
      ctx.state.route = name;
      // Refused before its body is read: the answer closes the connection rather than reading the rest.
      const unread = (err: unknown): never => {
        bodies.refuseUnread(ctx.req, ctx.res);
        throw err;
      };
      // The webmail's routes: Host, session cookie and CSRF token, before the body is read.
      const webmail = spec.webmail ? await gateWebmail(ctx, deps, spec.webmail).catch(unread) : null;
      // The credential's head first (docs/api.md §5): a request that cannot be authenticated is answered
      // before its body is read; then the body, hashed as it arrives; then the signature over it.
      const head = { method: ctx.method, target: ctx.originalUrl, headers: ctx.headers, ip: ctx.ip };
      const accepted = spec.auth === 'public' ? null : spec.auth;
      const checked = accepted && (await checkHead(head, accepted, deps).catch(unread));
      const body = await bodies.read(ctx.req, ctx.res, limit);
      // Its octets are lent (middleware/body-pool.ts) until this request is over: a read after that (a late
      // RequestCtx.rereadBody) is refused, never served another request's octets.
      let rawBody: Buffer | null = body.raw;
      // A body on a route that takes none is ignored (it was still covered by the signature). Parsed again, anew, for a
      // handler that asks (RequestCtx.rereadBody).
      const parseBody = () => {
        if (!rawBody) throw new Error('request body read after its request ended');
        return spec.body ? parseJson(rawBody) : undefined;
      };
      try {
        const principal =
          accepted && checked ? await completeAuthentication(checked, head, body.sha256, accepted, deps) : null;
        const json = parseBody();
        const input = {
          params: check.params ? check.params({ ...ctx.params }) : {},
          query: check.query ? check.query({ ...ctx.query }) : {},
          body: check.body ? check.body(json) : undefined,
        };
        const rc: RequestCtx = {
          principal,
          requestId: ctx.state.requestId as string,
          ip: ctx.ip,
          now: new Date(deps.ctx.clock.now()),
          deps,
          access: await authorizeRoute(deps.storage.db, spec, principal, input),
          audit: {},
          headers: {},
          webmail,
          rereadBody: parseBody,
        };
        const result = await handler(input as never, rc);
        // The change is committed: a failed audit row is logged (with everything it would have held) and never
        // turns the answer into a 500, which would make the client send again what already took effect.
        if (spec.method !== 'GET' && spec.audit !== false)
          await recordAudit(deps, name, spec, ctx.path, input.params as Record<string, unknown>, rc).catch((err) =>
            deps.ctx.log.error(
              { err, route: name, path: ctx.path, requestId: rc.requestId, ip: rc.ip },
              'audit row not written; the request took effect',
            ),
          );
        if (check.response) {
          const problems = check.response(JSON.parse(JSON.stringify(result)));
          if (problems) {
            deps.ctx.log.error(
              { route: name, problems, requestId: rc.requestId },
              'response does not match its schema',
            );
            throw new Error(`response of ${name} does not match its schema`);
          }
        }
        ctx.status = spec.status ?? 200;
        for (const [k, v] of Object.entries(rc.headers)) ctx.set(k, v);
        ctx.body = result;
      } finally {
        rawBody = null;
        body.release();
      }
    };
    router.register(koaPath(spec.path), [spec.method], route);
    if (!spec.path.includes('{')) exact.set(`${spec.method} ${spec.path}`, route);
  }

  // The client's address and scheme: the socket's, or what a trusted proxy says (SVC_TRUSTED_PROXIES).
  const trusted = networks(deps.ctx.config.trustedProxies);
  app.use(async (ctx, next) => {
    const peer = ctx.req.socket.remoteAddress ?? '';
    ctx.request.ip = clientAddress(peer, ctx.get('x-forwarded-for') || undefined, trusted);
    ctx.state.forwardedProto = trusted(peer) ? ctx.get('x-forwarded-proto').trim().toLowerCase() : '';
    await next();
  });
  app.use(accessLog(deps.ctx.log, opts.metrics));
  app.use(errorEnvelope(deps.ctx.log, randomUUID));
  app.use(opsEndpoints(deps, opts.scrape ?? opts.metrics));
  app.use(openApiEndpoint(deps));
  app.use(webmailPages(deps));
  app.use((ctx, next) => {
    const route = exact.get(`${ctx.method} ${ctx.path}`);
    return route ? route(ctx) : next();
  });
  app.use(router.routes());
  return app;
}

/**
 * Every mutating request that succeeded leaves one audit row: who, which route, on what. Written
 * here, once, so no handler can forget it.
 */
async function recordAudit(
  deps: Deps,
  action: string,
  spec: RouteSpec,
  path: string,
  params: Record<string, unknown>,
  rc: RequestCtx,
) {
  const actor = actorOf(rc.principal);
  // The innermost path parameter names what was acted on (…/tokens/{tokenId} → the token).
  const innermost = Object.values(params)
    .filter((v): v is string => typeof v === 'string')
    .pop();
  await insertAudit(deps.storage.db, {
    id: randomUUID(),
    createdAt: rc.now,
    actorKind: actor.kind,
    actorId: rc.audit.actorId ?? actor.id,
    action,
    method: spec.method,
    path,
    status: spec.status ?? 200,
    organizationId: rc.audit.organizationId ?? rc.access?.organizationId ?? null,
    projectId: rc.audit.projectId ?? rc.access?.projectId ?? null,
    targetId: rc.audit.targetId ?? innermost ?? null,
    requestId: rc.requestId,
    ip: rc.ip,
  });
}
