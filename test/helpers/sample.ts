// A minimal valid value for a request schema, so tests generated from the route table can call any
// route. `known` supplies values by field name (ids of fixtures, emails); everything else is made
// from the schema: required properties only, first literal of a union, shortest valid string.
import type { TSchema } from '@sinclair/typebox';

type Schema = TSchema & {
  type?: string;
  const?: unknown;
  anyOf?: Schema[];
  allOf?: Schema[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  minItems?: number;
  minLength?: number;
  minimum?: number;
  format?: string;
};

export function sample(schema: Schema, known: Record<string, unknown> = {}, name = ''): unknown {
  if (name && name in known) return known[name];
  if (schema.const !== undefined) return schema.const;
  if (schema.anyOf) return sample(schema.anyOf.find((s) => s.type !== 'null') ?? schema.anyOf[0]!, known, name);
  if (schema.allOf) return Object.assign({}, ...schema.allOf.map((s) => sample(s, known)));
  switch (schema.type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [k, s] of Object.entries(schema.properties ?? {})) {
        if ((schema.required ?? []).includes(k) || k in known) out[k] = sample(s, known, k);
      }
      return out;
    }
    case 'array':
      return Array.from({ length: schema.minItems ?? 0 }, () => sample(schema.items!, known));
    case 'string':
      if (schema.format === 'email') return 'sample@example.test';
      if (schema.format === 'date-time') return new Date(0).toISOString();
      if (schema.format === 'cidr') return '127.0.0.1/32';
      return 'sample-value-0123456789'.slice(0, Math.max(schema.minLength ?? 1, 12));
    case 'integer':
    case 'number':
      return schema.minimum ?? 1;
    case 'boolean':
      return false;
    default:
      return null;
  }
}
