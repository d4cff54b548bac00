// Template rendering (docs/api.md §4.13, §4.11 `variables`): `{{name}}` placeholders replaced by values.
// A pure function of its input: no I/O, no clock.
//
// It is substitution and nothing else. There are no expressions, helpers, partials, loops or paths
// (`{{a.b}}` is no placeholder), so a template cannot run code. Values are looked up in a Map built
// from the caller's own keys, never on an object: `{{constructor}}`, `{{__proto__}}` or
// `{{toString}}` are names like any other, missing unless the caller gives them a value.
import { TEMPLATE_VARIABLE_NAME } from '@svc-mail/sdk';
import type { TemplateVariable } from '../storage/pg/templates.js';

/** A placeholder's name, `{{name}}`: the route table's pattern of a variable name, so both say the same. */
export const VARIABLE_NAME = TEMPLATE_VARIABLE_NAME;

// `{{name}}`, with optional blanks inside the braces (`{{ name }}`). Anything else between braces
// (a line break, a dot, `#if`) is no placeholder and stays as written.
const PLACEHOLDER = new RegExp(`\\{\\{[ \\t]*(${VARIABLE_NAME})[ \\t]*\\}\\}`, 'g');

/** The most a rendering may produce: subject, html and text together, in UTF-8 octets. */
export const MAX_RENDERED_BYTES = 1024 * 1024;

export interface TemplateParts {
  subject: string | null;
  html: string | null;
  text: string | null;
}

export type RenderOutcome =
  | { ok: true; parts: TemplateParts }
  /** Placeholders with neither a value nor a default, in order of first appearance. */
  | { ok: false; reason: 'missing'; names: string[] }
  /** Values that would put CR, LF or NUL into the subject (RFC 5322 §2.2: never in a header). */
  | { ok: false; reason: 'subject_break'; names: string[] }
  /** The output would pass MAX_RENDERED_BYTES (or the limit given). */
  | { ok: false; reason: 'too_large'; limitBytes: number };

const HTML_ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text safe in HTML element content and in quoted attribute values. */
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => HTML_ESCAPES[c] as string);

const HEADER_BREAK = /[\r\n\0]/;

function valueMap(
  defaults: readonly TemplateVariable[],
  values: Readonly<Record<string, unknown>> | undefined,
): Map<string, string> {
  const out = new Map<string, string>();
  for (const v of defaults) if (typeof v.default === 'string') out.set(v.name, v.default);
  // Object.entries lists the object's own enumerable keys only: nothing inherited is ever read. A
  // JSON body's "__proto__" key is an own key (JSON.parse defines it) and is just a name here.
  for (const [k, v] of Object.entries(values ?? {})) {
    // Numbers and booleans are written as JSON writes them. null, or a type the route schemas do not
    // admit, is "not given": the default, if any, stays.
    if (typeof v === 'string') out.set(k, v);
    else if (typeof v === 'number' || typeof v === 'boolean') out.set(k, String(v));
  }
  return out;
}

function namesIn(s: string | null, into: Set<string>): void {
  if (s) for (const m of s.matchAll(PLACEHOLDER)) into.add(m[1] as string);
}

/**
 * Renders subject, html and text with `values` over the `defaults`: HTML-escaped in html, verbatim
 * in subject and text. A part that is null stays null. Stops as soon as the output passes `maxBytes`,
 * so a small template with a large value repeated cannot make it build a large string.
 */
export function renderTemplate(
  parts: TemplateParts,
  defaults: readonly TemplateVariable[],
  values: Readonly<Record<string, unknown>> | undefined,
  maxBytes = MAX_RENDERED_BYTES,
): RenderOutcome {
  const vals = valueMap(defaults, values);
  const used = new Set<string>();
  for (const p of [parts.subject, parts.html, parts.text]) namesIn(p, used);
  const missing = [...used].filter((n) => !vals.has(n));
  if (missing.length) return { ok: false, reason: 'missing', names: missing };

  const subjectNames = new Set<string>();
  namesIn(parts.subject, subjectNames);
  const breaking = [...subjectNames].filter((n) => HEADER_BREAK.test(vals.get(n) as string));
  if (breaking.length) return { ok: false, reason: 'subject_break', names: breaking };

  let budget = maxBytes;
  const render = (s: string | null, escape: boolean): string | null => {
    if (s === null) return null;
    const out: string[] = [];
    let last = 0;
    const take = (piece: string) => {
      budget -= Buffer.byteLength(piece, 'utf8');
      if (budget < 0) return false;
      out.push(piece);
      return true;
    };
    for (const m of s.matchAll(PLACEHOLDER)) {
      const value = vals.get(m[1] as string) as string;
      if (!take(s.slice(last, m.index)) || !take(escape ? escapeHtml(value) : value)) return null;
      last = m.index + m[0].length;
    }
    if (!take(s.slice(last))) return null;
    return out.join('');
  };
  const subject = render(parts.subject, false);
  const html = render(parts.html, true);
  const text = render(parts.text, false);
  if (budget < 0) return { ok: false, reason: 'too_large', limitBytes: maxBytes };
  return { ok: true, parts: { subject, html, text } };
}
