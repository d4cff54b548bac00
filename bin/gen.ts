// `svc gen` (npm run gen): writes what is derived from the route table into docs/, the OpenAPI
// document and the Markdown API reference. test/sdk/docs.test.ts regenerates both in memory and fails
// when the committed files differ, so they cannot drift from the table.
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { openApiDocument } from '../control/openapi.js';
import { referenceMarkdown } from '../control/reference.js';

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

/** Each generated file, by its path from the repository root, with its content. */
export function generatedDocs(): Record<string, string> {
  return {
    'docs/openapi.json': `${JSON.stringify(openApiDocument(), null, 2)}\n`,
    'docs/reference.md': referenceMarkdown(),
  };
}

export async function gen(): Promise<number> {
  for (const [file, content] of Object.entries(generatedDocs())) {
    await mkdir(path.dirname(path.join(ROOT, file)), { recursive: true });
    await writeFile(path.join(ROOT, file), content);
    console.log(`wrote ${file}`);
  }
  return 0;
}
