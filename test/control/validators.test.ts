// The route table's validators compile on a route's first request (control/middleware/validate.ts), not at
// start-up: this compiles every one of them, so a schema ajv cannot compile fails here rather than as a 500 on
// the first request to its route.
import t from 'tap';
import { routeTable, type RouteSpec } from '@svc-mail/sdk';
import { compileRequest, compileResponse } from '../../control/middleware/validate.js';
import { ApiError } from '../../core/errors.js';

for (const [name, route] of Object.entries(routeTable) as [string, RouteSpec][]) {
  t.test(name, async (t) => {
    for (const part of ['params', 'query', 'body'] as const) {
      const schema = route[part];
      if (!schema) continue;
      const check = compileRequest(part, schema);
      // An empty object: a valid one for some routes, a 400 naming the missing fields for others; never another error.
      try {
        t.ok(check({}), `${part}: an empty one passes`);
      } catch (err) {
        t.ok(err instanceof ApiError && err.code === 'invalid_request', `${part}: refused as invalid_request (${err})`);
      }
    }
    const problems = compileResponse(route.response)(Symbol('not a response'));
    t.ok(Array.isArray(problems) && problems.length > 0, 'response: a symbol does not match');
  });
}
