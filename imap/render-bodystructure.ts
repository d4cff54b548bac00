// FETCH BODY and BODYSTRUCTURE (RFC 3501 §7.4.2, grammar in §9) from the MIME tree stored with each
// message (mail/mime-tree.ts). BODY is the non-extensible form; BODYSTRUCTURE adds the extension data:
// MD5, disposition, language and location for a single part, parameters, disposition, language and
// location for a multipart. Values are written as the header holds them (types and parameter names in
// lower case, as the tree keeps them); quoting and literals are imap/response.ts's.
import type { Disposition, MimeEntity } from '../mail/mime-tree.js';
import type { ImapValue } from './response.js';
import { envelopeValue } from './render-envelope.js';

/** RFC 3501 §9 body-fld-param: "(" string SP string *(SP string SP string) ")" / nil. */
function params(list: readonly [string, string][]): ImapValue {
  return list.length ? list.flatMap(([name, value]) => [name, value]) : null;
}

/** RFC 3501 §9 body-fld-dsp: "(" string SP body-fld-param ")" / nil. */
function disposition(d: Disposition | null): ImapValue {
  return d ? [d.type, params(d.params)] : null;
}

/** RFC 3501 §9 body-fld-lang: nstring / "(" string *(SP string) ")": one tag alone, several as a list. */
function language(tags: readonly string[] | null): ImapValue {
  if (!tags || tags.length === 0) return null;
  return tags.length === 1 ? (tags[0] as string) : [...tags];
}

/**
 * RFC 3501 §9 body-fields: parameters, id, description, encoding, octets. An absent
 * Content-Transfer-Encoding is 7BIT (RFC 2045 §6.1).
 */
function fields(e: MimeEntity): ImapValue[] {
  return [params(e.params), e.id, e.description, e.encoding ?? '7BIT', e.size];
}

/**
 * One entity as `body` (RFC 3501 §9): a multipart as its parts side by side then its subtype; a
 * message/rfc822 with the envelope, body and line count of the message it holds; text/* with its line
 * count; anything else basic. `extensible` adds the extension data (BODYSTRUCTURE).
 */
export function bodyValue(e: MimeEntity, extensible: boolean): ImapValue {
  if (e.children && e.children.length) {
    // body-type-mpart = 1*body SP media-subtype [SP body-ext-mpart]
    const parts: ImapValue = { kind: 'adjacent', values: e.children.map((c) => bodyValue(c, extensible)) };
    const out: ImapValue[] = [parts, e.subtype];
    if (extensible) out.push(params(e.params), disposition(e.disposition), language(e.language), e.location);
    return out;
  }
  const out: ImapValue[] = [e.type, e.subtype, ...fields(e)];
  if (e.type === 'message' && e.subtype === 'rfc822' && e.message) {
    // body-type-msg: ... SP envelope SP body SP body-fld-lines (RFC 3501 §7.4.2: the encapsulated message).
    out.push(envelopeValue(e.message.envelope), bodyValue(e.message.body, extensible), e.lines);
  } else if (e.type === 'text') {
    out.push(e.lines); // body-type-text: ... SP body-fld-lines
  }
  // body-ext-1part = body-fld-md5 [SP body-fld-dsp [SP body-fld-lang [SP body-fld-loc]]]
  if (extensible) out.push(e.md5, disposition(e.disposition), language(e.language), e.location);
  return out;
}
