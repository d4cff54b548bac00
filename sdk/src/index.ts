// @svc-mail/sdk: the route table of the svc-mail HTTP API (every route's method, path, credentials,
// permission or scope and request and response schemas), request signing, and a typed client built
// from the two. The server imports the same table, so the client cannot drift from it. Node 20 or a
// browser: nothing here imports Node's own modules.
export * from './api/index.js';
export * from './signing.js';
export * from './client.js';
export * from './paginate.js';
