// docs/openapi.json and docs/reference.md are derived from the route table by `npm run gen`; this
// regenerates them in memory and fails when a committed file differs, so neither can drift.
import t from 'tap';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { routeTable } from '@svc-mail/sdk';
import { generatedDocs, ROOT } from '../../bin/gen.js';
import { typeOf } from '../../control/reference.js';

t.test('the committed generated docs are current (run `npm run gen` when this fails)', async (t) => {
  const docs = generatedDocs();
  t.same(Object.keys(docs).sort(), ['docs/openapi.json', 'docs/reference.md']);
  for (const [file, content] of Object.entries(docs)) {
    const committed = await readFile(path.join(ROOT, file), 'utf8').catch(() => null);
    t.ok(committed !== null, `${file} exists`);
    // t.equal on 700 kB would print both; say where they part instead.
    let at = 0;
    while (committed !== null && at < content.length && committed[at] === content[at]) at++;
    const same = committed === content;
    t.ok(same, `${file} is what npm run gen writes${same ? '' : ` (they part at character ${at})`}`);
  }
});

t.test('the reference names every route once, with its method and path', async (t) => {
  const md = generatedDocs()['docs/reference.md']!;
  for (const [name, r] of Object.entries(routeTable)) {
    t.equal(md.split(`\n### ${name}\n`).length, 2, `${name} has one section`);
    t.ok(md.includes(`### ${name}\n\n\`${r.method} ${r.path}\`\n`), `${name}: ${r.method} ${r.path}`);
  }
});

t.test('schemas read as TypeScript types', async (t) => {
  const s = {
    type: 'object',
    required: ['id', 'tags'],
    properties: {
      id: { type: 'string', format: 'uuid' },
      tags: { type: 'array', items: { anyOf: [{ const: 'a' }, { const: 'b' }] } },
      note: { anyOf: [{ type: 'string' }, { type: 'null' }] },
      n: { type: 'integer' },
    },
  };
  t.equal(typeOf(s), '{ id: string; tags: Array<"a" | "b">; note?: string | null; n?: number }');
  t.equal(
    typeOf(s, ''),
    '{\n  id: string; // uuid\n  tags: Array<"a" | "b">;\n  note?: string | null;\n  n?: number;\n}',
  );
  const both = { allOf: [s, { type: 'object', required: ['x'], properties: { x: { type: 'boolean' } } }] };
  t.match(typeOf(both), /; x: boolean \}$/, 'an intersection of objects is one object');
  t.equal(typeOf({}), 'unknown');
});
