// The SDK, the OpenAPI document and the route table cannot drift apart: every route has its SDK
// method and its operation, named after its path as docs/api.md §1 rule 5 says, and the SDK sends each call
// to the method and path of its route.
import t from 'tap';
import { routeTable, type RouteSpec, createClient, SvcError } from '@svc-mail/sdk';
import { openApiDocument } from '../../control/openapi.js';
import { startTestService } from '../helpers/service.js';

const routes = Object.entries(routeTable) as [string, RouteSpec][];
const PRODUCTS = ['auth', 'console', 'admin', 'webmail', 'modules', 'v1', 'health'];

const camel = (segment: string) => segment.replace(/[-_]+([a-z0-9])/g, (_, c: string) => c.toUpperCase());
const isParam = (segment: string) => /^\{\w+\}$/.test(segment);
const pathParams = (p: string) => [...p.matchAll(/\{(\w+)\}/g)].map((m) => m[1] as string);

/** The product of a path (docs/api.md §1 layout) and its literal segments after the product and version. */
function splitPath(p: string): { product: string; literals: string[] } | null {
  if (p === '/health') return { product: 'health', literals: [] };
  const segs = p.split('/').slice(1);
  let rest: string[];
  let product: string;
  if (segs[0] === 'v1') {
    // /v1/<table>/<verb> and /v1/services/<action>
    product = 'v1';
    rest = segs.slice(1);
  } else if (segs[0] === 'modules') {
    // /modules/<module>/v1/...
    if (segs[2] !== 'v1') return null;
    product = 'modules';
    rest = [segs[1] as string, ...segs.slice(3)];
  } else if (['auth', 'console', 'admin', 'webmail'].includes(segs[0] ?? '')) {
    // /<product>/v1/...
    if (segs[1] !== 'v1') return null;
    product = segs[0] as string;
    rest = segs.slice(2);
  } else return null;
  if (rest.some((s) => s === '')) return null;
  // docs/api.md §1 rule 5: client.v1.<table>.<verb>() keeps the data layer's table name as it is
  // (api_keys); every other literal segment is camelCased (account-tokens → accountTokens).
  const literals = rest.filter((s) => !isParam(s));
  return { product, literals: product === 'v1' && literals[0] !== 'services' ? literals : literals.map(camel) };
}

/** True when `needles` appear in `hay` in the same order (not necessarily adjacent). */
function inOrder(needles: string[], hay: string[]): boolean {
  let i = 0;
  for (const h of hay) if (i < needles.length && h === needles[i]) i++;
  return i === needles.length;
}

t.test('helpers of this test', async (t) => {
  // The rule checker must itself be able to say no.
  t.same(splitPath('/console/v1/account-tokens/{id}'), { product: 'console', literals: ['accountTokens'] });
  t.same(splitPath('/modules/templates/v1/templates/{id}/render'), {
    product: 'modules',
    literals: ['templates', 'templates', 'render'],
  });
  t.same(splitPath('/v1/services/whoami'), { product: 'v1', literals: ['services', 'whoami'] });
  t.equal(splitPath('/api/console/v1/x'), null, 'no /api prefix (docs/api.md §1 rule 1)');
  t.equal(splitPath('/console/x'), null, 'a product path without its version');
  t.ok(inOrder(['a', 'c'], ['a', 'b', 'c']));
  t.notOk(inOrder(['c', 'a'], ['a', 'b', 'c']));
});

t.test('the route table is not empty and has /health', async (t) => {
  t.ok(routes.length >= 2);
  t.ok(
    routes.some(([, r]) => r.method === 'GET' && r.path === '/health'),
    'GET /health (docs/api.md §1 rule 4)',
  );
});

t.test('every route has an SDK method at its dotted name', async (t) => {
  const client = createClient({ baseUrl: 'http://127.0.0.1:9' }) as unknown as Record<string, unknown>;
  for (const [name] of routes) {
    let node: unknown = client;
    for (const part of name.split('.')) node = (node as Record<string, unknown> | undefined)?.[part];
    t.type(node, 'function', `client.${name}`);
  }
  t.type(client.request, 'function', 'client.request, the raw call');
});

t.test('every name follows docs/api.md §1 rule 5', async (t) => {
  for (const [name, r] of routes) {
    const parts = name.split('.');
    const split = splitPath(r.path);
    t.ok(split, `${r.path} has a product prefix (auth, console, admin, webmail, modules, v1 or health)`);
    if (!split) continue;
    t.ok(PRODUCTS.includes(split.product));
    t.equal(parts[0], split.product, `${name}: first segment is the product of ${r.path}`);
    t.ok(inOrder(split.literals, parts.slice(1)), `${name}: ${JSON.stringify(split.literals)} appear in order`);
    const table = split.product === 'v1' && parts[1] !== 'services' ? 1 : -1;
    t.ok(
      parts.every((p, i) => (i === table ? /^[a-z][a-z0-9_]*$/ : /^[a-z][A-Za-z0-9]*$/).test(p)),
      `${name}: camelCase segments (a data-layer table keeps its snake_case name)`,
    );
  }
});

t.test('no two routes share method and path', async (t) => {
  const seen = new Map<string, string>();
  for (const [name, r] of routes) {
    // /x/{id} and /x/{name} are the same route to the router.
    const key = `${r.method} ${r.path.replace(/\{\w+\}/g, '{}')}`;
    t.notOk(seen.has(key), `${key}: ${name}${seen.has(key) ? ' and ' + seen.get(key) : ''}`);
    seen.set(key, name);
  }
});

t.test('path parameters and their schemas agree', async (t) => {
  for (const [name, r] of routes) {
    t.same(
      Object.keys(r.params?.properties ?? {}).sort(),
      pathParams(r.path).sort(),
      `${name}: params schema matches ${r.path}`,
    );
  }
});

t.test('the OpenAPI document has one operation per route', async (t) => {
  const doc = openApiDocument() as {
    paths: Record<string, Record<string, { operationId?: string; parameters?: { name: string; in: string }[] }>>;
  };
  let operations = 0;
  for (const ops of Object.values(doc.paths)) operations += Object.keys(ops).length;
  t.equal(operations, routes.length, 'no operation without a route');
  const ids = new Set<string>();
  for (const [name, r] of routes) {
    const op = doc.paths[r.path]?.[r.method.toLowerCase()];
    t.ok(op, `${r.method} ${r.path} is documented`);
    t.equal(op?.operationId, name, `${r.method} ${r.path}: operationId ${name}`);
    if (op?.operationId) ids.add(op.operationId);
    const documented = (op?.parameters ?? [])
      .filter((p) => p.in === 'path')
      .map((p) => p.name)
      .sort();
    t.same(documented, pathParams(r.path).sort(), `${name}: path parameters documented`);
  }
  t.equal(ids.size, routes.length, 'operationIds are unique');
});

t.test('each SDK method calls its own method and path', async (t) => {
  for (const [name, r] of routes) {
    const sent: { method: string; url: string; body: unknown }[] = [];
    const fakeFetch = (async (url: string | URL | Request, init?: RequestInit) => {
      sent.push({ method: init?.method ?? 'GET', url: String(url), body: init?.body });
      return new Response('{"ok":true}', { status: 200, headers: { 'content-type': 'application/json' } });
    }) as typeof fetch;
    const client = createClient({
      baseUrl: 'http://svc.test/',
      fetch: fakeFetch,
      credential: { keyId: 'svca_x', secret: 's' },
    });
    const args: Record<string, string> = {};
    for (const p of pathParams(r.path)) args[p] = `${p} value/1`;
    let fn: unknown = client;
    for (const part of name.split('.')) fn = (fn as Record<string, unknown>)[part];
    await (fn as (a: unknown) => Promise<unknown>)(args);
    const expected = r.path.replace(/\{(\w+)\}/g, (_, p: string) => encodeURIComponent(`${p} value/1`));
    t.same(
      sent.map((s) => [s.method, s.url]),
      [[r.method, `http://svc.test${expected}`]],
      `${name}: ${r.method} ${expected}`,
    );
  }
});

t.test('live: the SDK reaches the route and surfaces the error envelope', async (t) => {
  const svc = await startTestService(t);
  const me = await svc.signup();
  const sent: { method: string; path: string; requestId: string | null }[] = [];
  const recording = (async (url: string | URL | Request, init?: RequestInit) => {
    const res = await fetch(url, init);
    sent.push({
      method: init?.method ?? 'GET',
      path: new URL(String(url)).pathname,
      requestId: res.headers.get('x-request-id'),
    });
    return res;
  }) as typeof fetch;
  const client = createClient({
    baseUrl: svc.url,
    credential: { keyId: me.tokenId, secret: me.secret },
    fetch: recording,
    now: svc.clock.now,
  });

  const err = await client.console.accountTokens.delete({ id: 'x/y' }).then(
    () => null,
    (e: unknown) => e,
  );
  t.type(err, SvcError, 'rejects with an SvcError');
  t.same(
    sent.map(({ method, path }) => ({ method, path })),
    [{ method: 'DELETE', path: '/console/v1/account-tokens/x%2Fy' }],
    'DELETE /console/v1/account-tokens/x%2Fy',
  );
  if (err instanceof SvcError) {
    t.equal(err.status, 404, 'status');
    t.equal(err.code, 'not_found', 'code');
    // The handler's message, not the router's "No such route.": the call reached the route.
    t.equal(err.message, 'No such account token.', 'message');
    t.type(err.requestId, 'string', 'requestId');
    t.ok(err.requestId && err.requestId.length > 0);
    t.equal(err.requestId, sent[0]?.requestId, 'requestId is the X-Request-Id of the answer');
  }

  // The same method on a real id succeeds, and the token is gone afterwards.
  const extra = await client.console.accountTokens.create({ label: 'drift' });
  t.same(await client.console.accountTokens.delete({ id: extra.tokenId }), { ok: true });
  const { tokens } = await client.console.accountTokens.list();
  t.notOk(
    tokens.some((tok) => tok.tokenId === extra.tokenId),
    'the deleted token is no longer listed',
  );
  t.same(
    sent.slice(1).map(({ method, path }) => `${method} ${path}`),
    [
      'POST /console/v1/account-tokens',
      `DELETE /console/v1/account-tokens/${encodeURIComponent(extra.tokenId)}`,
      'GET /console/v1/account-tokens',
    ],
  );

  const health = await createClient({ baseUrl: svc.url }).health();
  t.equal(health.ok, true, 'client.health() is GET /health');
});
