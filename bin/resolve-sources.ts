// Runs the service from its TypeScript sources on Node alone: `node --import ./bin/resolve-sources.ts <file.ts>`
// (npm start, npm run dev, the tests and the children they spawn; a server runs the compiled dist/ instead).
// Node strips the types itself (docs/decisions.md #81), which needs erasable syntax only (tsconfig.json's
// erasableSyntaxOnly); what it does not do is resolve the names tsc's NodeNext layout gives: an import of './x.js'
// means the source './x.ts' beside it, and @svc-mail/sdk means the SDK's source (tsconfig.json's `paths`), not its
// package's built dist/. These hooks run in the thread that loads the module (registerHooks, Node 22.15 and later),
// with no round trip to a loader thread for each of the ~1,200 modules `svc start` loads.
import { registerHooks } from 'node:module';

const SDK = new URL('../sdk/src/index.ts', import.meta.url).href;

registerHooks({
  resolve(specifier, context, nextResolve) {
    if (specifier === '@svc-mail/sdk') return nextResolve(SDK, context);
    const parent = context.parentURL;
    if (
      parent !== undefined &&
      parent.endsWith('.ts') &&
      specifier.endsWith('.js') &&
      (specifier.startsWith('./') || specifier.startsWith('../')) &&
      !parent.includes('/node_modules/')
    ) {
      try {
        return nextResolve(`${specifier.slice(0, -3)}.ts`, context);
      } catch (err) {
        // A real .js file (none among the sources today): resolved as named.
        if ((err as { code?: string }).code !== 'ERR_MODULE_NOT_FOUND') throw err;
      }
    }
    return nextResolve(specifier, context);
  },
});
