// The node arguments that run a TypeScript source file as `npm start` runs bin/svc.ts, for the children tests
// spawn: Node strips the types, and bin/resolve-sources.ts resolves the sources' import names (an absolute path, so
// that a child started in another directory finds it too).
import { fileURLToPath } from 'node:url';

export const FROM_SOURCES = ['--import', fileURLToPath(new URL('../../bin/resolve-sources.ts', import.meta.url))];
