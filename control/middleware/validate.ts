// ajv validators of the route table's schemas, each compiled once, on the route's first request. A failure
// is 400 `invalid_request` whose details name every failing field.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormats from 'ajv-formats';
import type { TSchema } from '@sinclair/typebox';
import { isCidr } from '../../mail/client-address.js';
import { fail } from '../errors.js';

// Bodies: unknown fields are refused, never dropped (docs/decisions.md #23): a misspelt optional field
// would otherwise be ignored without a word. Types are not coerced (a JSON string is not a number).
const bodyAjv = addFormats.default(new Ajv({ allErrors: true, strict: false }));
// Query strings and path parameters arrive as text: coerce them to the declared types. Unknown query
// parameters are refused too.
const textAjv = addFormats.default(new Ajv({ allErrors: true, coerceTypes: true, strict: false }));
// Responses (checked when SVC_CHECK_RESPONSES is on, as in tests): exactly as declared.
const responseAjv = addFormats.default(new Ajv({ allErrors: true, strict: false }));

for (const a of [bodyAjv, textAjv, responseAjv]) a.addFormat('cidr', isCidr);

export type Part = 'params' | 'query' | 'body';

export interface FieldError {
  field: string;
  message: string;
}

/** A path as the error envelope names it (docs/api.md): `to[1]`, `messages[0].cc[2]`, `headers.X-Foo`. */
export function fieldPath(segments: readonly string[]): string {
  return segments.reduce((path, s) => (/^\d+$/.test(s) ? `${path}[${s}]` : path ? `${path}.${s}` : s), '');
}

export function fieldErrors(part: string, errors: ErrorObject[] | null | undefined): FieldError[] {
  const out: FieldError[] = [];
  for (const e of errors ?? []) {
    const segments = e.instancePath
      .split('/')
      .slice(1)
      .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
    if (e.keyword === 'required') segments.push((e.params as { missingProperty: string }).missingProperty);
    if (e.keyword === 'additionalProperties')
      segments.push((e.params as { additionalProperty: string }).additionalProperty);
    const field = fieldPath(segments);
    const message =
      e.keyword === 'required'
        ? 'is required'
        : e.keyword === 'additionalProperties'
          ? 'is not a known field'
          : (e.message ?? 'is invalid');
    const key = field ? `${part}${field.startsWith('[') ? '' : '.'}${field}` : part;
    // One entry a field: its first error is the most telling (a Nullable's `anyOf` adds "must be null" and
    // "must match a schema in anyOf" after the real one).
    if (!out.some((o) => o.field === key)) out.push({ field: key, message });
  }
  return out;
}

/**
 * `compile` on the first call rather than at start-up: compiling the whole route table's schemas took about 1 s
 * of CPU here (0.4 s without the responses', which tests check), and a process serves few of its routes (a test,
 * a CLI command). ajv caches by schema, so the same schema compiles once a process.
 */
function onFirstUse(compile: () => ValidateFunction): () => ValidateFunction {
  let v: ValidateFunction | null = null;
  return () => (v ??= compile());
}

export function compileRequest(part: Part, schema: TSchema): (value: unknown) => unknown {
  const validator = onFirstUse(() => (part === 'body' ? bodyAjv : textAjv).compile(schema));
  return (value) => {
    if (part === 'body' && value === undefined) value = {};
    const v = validator();
    if (!v(value)) {
      const details = fieldErrors(part, v.errors);
      throw fail(
        'invalid_request',
        `Invalid ${part}: ${details.map((d) => `${d.field} ${d.message}`).join('; ')}.`,
        details,
      );
    }
    return value;
  };
}

export function compileResponse(schema: TSchema): (value: unknown) => FieldError[] | null {
  const validator = onFirstUse(() => responseAjv.compile(schema));
  return (value) => {
    const v = validator();
    return v(value) ? null : fieldErrors('response', v.errors);
  };
}
