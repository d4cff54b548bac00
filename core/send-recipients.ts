// sendEmail's recipients (docs/api.md §4.11): `to`, `cc` and `bcc`, each one address or an array of them,
// bare or in the display-name form. At least one `to`; at most MAX_RECIPIENTS given in all. An address given
// twice (the local part as given, the domain case-insensitive: how suppressions compare them too) is one
// recipient, in the first place it was given (to before cc before bcc). Bcc recipients are in no header.
import { MAX_RECIPIENTS } from '@svc-mail/sdk';
import { fail } from './errors.js';
import { normalizeMailbox, parseRecipient, type Mailbox } from '../mail/compose.js';

export type RecipientKind = 'to' | 'cc' | 'bcc';

export interface Recipient {
  /** As suppressions store it and RCPT TO sends it: the local part as given, the domain in lower case. */
  address: string;
  kind: RecipientKind;
}

export interface RecipientFields {
  to: string | readonly string[];
  cc?: string | readonly string[];
  bcc?: string | readonly string[];
}

export interface Recipients {
  /** Distinct, in the order given: to, then cc, then bcc. */
  list: Recipient[];
  /**
   * What the To and Cc header fields show (each address once), or null for the plain message to one bare
   * address, whose To field mail/compose.ts writes from the recipient itself.
   */
  header: { to: Mailbox[]; cc: Mailbox[] } | null;
}

// RFC 5322 §2.2: a field body never holds a bare CR or LF; NUL is never valid.
const HEADER_BREAK = /[\r\n\0]/;

/** Checks and dedupes the recipients of a send; a 400 naming every field refused. */
export function recipientsOf(b: RecipientFields): Recipients {
  // The plain send: one bare address, no cc or bcc. No parsing of a display name, no dedupe.
  if (typeof b.to === 'string' && b.cc === undefined && b.bcc === undefined && !b.to.includes('<')) {
    const address = normalizeMailbox(b.to);
    if (address) return { list: [{ address, kind: 'to' }], header: null };
  }
  const problems: { field: string; message: string }[] = [];
  const seen = new Set<string>();
  const list: Recipient[] = [];
  const header = { to: [] as Mailbox[], cc: [] as Mailbox[] };
  let given = 0;
  for (const kind of ['to', 'cc', 'bcc'] as const) {
    const raw = b[kind];
    if (raw === undefined) continue;
    const items = typeof raw === 'string' ? [raw] : raw;
    given += items.length;
    items.forEach((a, i) => {
      const field = typeof raw === 'string' ? `body.${kind}` : `body.${kind}[${i}]`;
      const m = parseRecipient(a);
      if (!m) {
        problems.push({
          field,
          message: HEADER_BREAK.test(a)
            ? 'must not contain CR, LF or NUL'
            : 'is not an address or a "Name <address>" (ASCII address, at most 254 octets)',
        });
        return;
      }
      if (seen.has(m.address)) return;
      seen.add(m.address);
      list.push({ address: m.address, kind });
      if (kind !== 'bcc') header[kind].push(m);
    });
  }
  if (typeof b.to !== 'string' && b.to.length === 0) problems.push({ field: 'body.to', message: 'is empty' });
  if (given > MAX_RECIPIENTS)
    problems.push({ field: 'body', message: `has ${given} recipients in to, cc and bcc; at most ${MAX_RECIPIENTS}` });
  if (problems.length) {
    const single = problems.length === 1 && problems[0]!.field === 'body.to';
    throw fail(
      'invalid_request',
      single
        ? 'to is not a valid address.'
        : `Invalid recipients: ${problems.map((p) => `${p.field} ${p.message}`).join('; ')}.`,
      problems,
    );
  }
  return { list, header };
}
