// The Markdown API reference (docs/reference.md), derived from the route table as the OpenAPI
// document is (never written by hand): per route its method and path, the credentials it accepts,
// the permission, role or scope it needs, its request fields and the shape of its answer, grouped
// by product (docs/api.md §1). `svc gen` writes it; test/sdk/docs.test.ts fails when it is stale.
import { routeTable, type RouteSpec } from '@svc-mail/sdk';
import { errorStatus } from './errors.js';

/** A JSON Schema as TypeBox emits it, as far as this page needs to read one. */
interface Schema {
  type?: string;
  const?: unknown;
  anyOf?: Schema[];
  allOf?: Schema[];
  properties?: Record<string, Schema>;
  required?: string[];
  patternProperties?: Record<string, Schema>;
  items?: Schema;
  format?: string;
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  minItems?: number;
  maxItems?: number;
  uniqueItems?: boolean;
}

const PRODUCTS: [string, string][] = [
  ['health', 'Health'],
  ['auth', 'Auth: sign-up, login and passwords'],
  ['console', 'Console: organizations, projects, keys, domains'],
  ['v1', 'Data layer and services (/v1)'],
  ['modules', 'Modules'],
  ['admin', 'Admin (platform staff and the platform key)'],
  ['webmail', 'Webmail (the session cookie of one inbox)'],
];

/** An intersection of objects reads better as the one object it is. */
function merged(s: Schema): Schema {
  if (!s.allOf?.every((p) => p.type === 'object' && p.properties)) return s;
  const parts = s.allOf.map(merged);
  return {
    type: 'object',
    properties: Object.assign({}, ...parts.map((p) => p.properties)),
    required: parts.flatMap((p) => p.required ?? []),
  };
}

/** The format of a string field, also of a nullable one. */
const formatOf = (s: Schema): string | undefined => s.format ?? s.anyOf?.find((a) => a.format)?.format;

/** The schema as a TypeScript type, on one line or indented over several (`indent` set). */
export function typeOf(schema: Schema, indent?: string): string {
  const s = merged(schema);
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.anyOf) return s.anyOf.map((a) => typeOf(a, indent)).join(' | ');
  if (s.allOf) return s.allOf.map((a) => typeOf(a, indent)).join(' & ');
  switch (s.type) {
    case 'string':
    case 'number':
    case 'boolean':
    case 'null':
      return s.type;
    case 'integer':
      return 'number';
    case 'array': {
      const item = typeOf(s.items ?? {}, indent);
      return /^[\w"]+$/.test(item) ? `${item}[]` : `Array<${item}>`;
    }
    case 'object': {
      const entries = Object.entries(s.properties ?? {}).map(([name, p]) => {
        const optional = (s.required ?? []).includes(name) ? '' : '?';
        return `${name}${optional}: ${typeOf(p, indent === undefined ? undefined : indent + '  ')}`;
      });
      // Over several lines, a field's format follows it as a comment.
      const formats = Object.values(s.properties ?? {}).map((p) => formatOf(p));
      for (const p of Object.values(s.patternProperties ?? {}))
        entries.push(`[key: string]: ${typeOf(p, indent === undefined ? undefined : indent + '  ')}`);
      if (!entries.length) return 'Record<string, never>';
      if (indent === undefined) return `{ ${entries.join('; ')} }`;
      const line = (e: string, i: number) => `${indent}  ${e};${formats[i] ? ` // ${formats[i]}` : ''}`;
      return `{\n${entries.map(line).join('\n')}\n${indent}}`;
    }
    default:
      return 'unknown';
  }
}

/** What a field's type does not say: its format and its limits. */
function constraints(s: Schema): string {
  const c: string[] = [];
  if (s.type === 'integer') c.push('integer');
  if (s.format) c.push(`format ${s.format}`);
  if (s.pattern) c.push(`pattern \`${s.pattern}\``);
  if (s.minLength !== undefined) c.push(`at least ${s.minLength} characters`);
  if (s.maxLength !== undefined) c.push(`at most ${s.maxLength} characters`);
  if (s.minimum !== undefined) c.push(`≥ ${s.minimum}`);
  if (s.maximum !== undefined) c.push(`≤ ${s.maximum}`);
  if (s.minItems !== undefined) c.push(`at least ${s.minItems} item${s.minItems === 1 ? '' : 's'}`);
  if (s.maxItems !== undefined) c.push(`at most ${s.maxItems} items`);
  if (s.uniqueItems) c.push('no duplicates');
  if (s.items) {
    const inner = constraints(s.items);
    if (inner) c.push(`each: ${inner}`);
  }
  return c.join(', ');
}

// A Markdown table cell: a pipe would end the cell.
const cell = (text: string) => text.replace(/\|/g, '\\|');

function requestFields(r: RouteSpec): string[] {
  const rows: string[] = [];
  const from = (where: 'path' | 'query' | 'body', o: Schema | undefined) => {
    for (const [name, s] of Object.entries(o?.properties ?? {})) {
      const required = where === 'path' || (o?.required ?? []).includes(name) ? 'yes' : 'no';
      rows.push(`| \`${name}\` | ${where} | \`${cell(typeOf(s))}\` | ${required} | ${cell(constraints(s))} |`);
    }
  };
  from('path', r.params as Schema | undefined);
  from('query', r.query as Schema | undefined);
  from('body', r.body as Schema | undefined);
  if (!rows.length) return ['Request: no fields.'];
  return ['| Field | In | Type | Required | Limits |', '|---|---|---|---|---|', ...rows];
}

function access(r: RouteSpec): string[] {
  const lines = [
    r.webmail === 'session'
      ? '- Credentials: the webmail session cookie; changes also send its CSRF token in `X-CSRF-Token` (§4.15).'
      : r.webmail === 'signin'
        ? '- Credentials: the inbox address and password in the body; sets the webmail session cookie (§4.15).'
        : r.auth === 'public'
          ? '- Credentials: none (public, unsigned).'
          : `- Credentials: ${r.auth.map((k) => `\`${k}\``).join(', ')}.`,
  ];
  const needs: string[] = [];
  if (r.permission) needs.push(`permission \`${r.permission}\` (members)`);
  if (r.role) needs.push(`role \`${r.role}\` (members)`);
  if (r.scope) needs.push(`scope \`${r.scope}\` (project keys)`);
  if (needs.length) lines.push(`- Needs: ${needs.join('; ')}.`);
  else if (r.auth !== 'public') lines.push('- Needs: no permission or scope beyond access to what it acts on.');
  if (r.target) lines.push(`- Acts on: the ${r.target.kind} named by \`${r.target.field}\` (${r.target.in}).`);
  if (r.status && r.status !== 200) lines.push(`- Success status: ${r.status}.`);
  if (r.bodyLimit) lines.push(`- Request body limit: ${r.bodyLimit} bytes.`);
  return lines;
}

export function referenceMarkdown(): string {
  const routes = Object.entries(routeTable) as [string, RouteSpec][];
  const out = [
    '# API reference',
    '',
    '<!-- Generated by `npm run gen` from the route table (sdk/src/api/); do not edit by hand. -->',
    '',
    'Every route of the HTTP API, grouped by product. The SDK method of a route is its name:',
    '`client.console.projects.create(args)` calls `POST /console/v1/projects`, with path parameters,',
    'query fields and body fields in one `args` object. Signed requests are described in docs/api.md §5;',
    'the machine-readable form of this page is docs/openapi.json. Types are in TypeScript notation;',
    'a field marked `?` may be absent.',
    '',
  ];
  for (const [product, title] of PRODUCTS) {
    const mine = routes.filter(([name]) => name.split('.')[0] === product);
    if (!mine.length) continue;
    out.push(`## ${title}`, '');
    for (const [name, r] of mine) out.push(`- [\`${r.method} ${r.path}\`](#${name.replace(/\./g, '').toLowerCase()})`);
    out.push('');
    for (const [name, r] of mine) {
      out.push(`### ${name}`, '', `\`${r.method} ${r.path}\``, '', r.summary, '', ...access(r), '');
      out.push(...requestFields(r), '', 'Response:', '', '```ts', typeOf(r.response as Schema, ''), '```', '');
    }
  }
  const known = new Set(PRODUCTS.map(([p]) => p));
  const stray = routes.filter(([name]) => !known.has(name.split('.')[0] ?? ''));
  if (stray.length) throw new Error(`routes of no known product: ${stray.map(([n]) => n).join(', ')}`);
  out.push('## Errors', '', 'Every error answer is the envelope of docs/decisions.md #1, with one of these codes:', '');
  out.push('| Code | Status |', '|---|---|');
  for (const [code, status] of Object.entries(errorStatus)) out.push(`| \`${code}\` | ${status} |`);
  out.push('');
  return out.join('\n');
}
