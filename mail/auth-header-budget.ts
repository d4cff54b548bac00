// What a received message's header may hold for mailauth (the inbound DKIM, ARC, SPF and DMARC checks,
// mta/inbound/authenticate.ts) to be run on it in bounded time (docs/decisions.md #67).
//
// mailauth 7.1.0 parses the fields it reads with regexes that backtrack quadratically over what a sender wrote:
// a DKIM-Signature with 200 kB of whitespace in one tag took 43 s of the MTA's one thread, which also delivers
// every outgoing message. The fields it parses that way are the signatures and seals, Authentication-Results,
// Received and From; each costs at most about the square of its length, so their squares are summed against a
// budget: 2^26, one 8 kB field's worth (~70 ms at worst). A legitimate header, ARC chain and all, comes to a
// tenth of it. Nor is every signature verified: each costs a DNS lookup and an RSA verification, so past 10
// DKIM signatures or 50 ARC sets (RFC 8617 §4.2.1's limit) the message is not authenticated at all. A bare CR,
// which RFC 5322 §2.2 forbids in a header, would make a run that one of those regexes scans from every point.

import { fieldSpans } from './mime-header.js';

/** The sum of the squared lengths of the fields mailauth parses, past which it is not run. */
export const AUTH_FIELD_BUDGET = 2 ** 26;
export const MAX_DKIM_SIGNATURES = 10;
/** RFC 8617 §4.2.1: a chain of more than 50 sets fails; three fields a set. */
export const MAX_ARC_FIELDS = 150;

const PARSED = new Set([
  'dkim-signature',
  'arc-seal',
  'arc-message-signature',
  'arc-authentication-results',
  'authentication-results',
  'received',
  'from',
]);

/** Why mailauth may not be given `header` (the header block, up to its blank line), or null when it may. */
export function authHeaderProblem(header: Buffer): string | null {
  for (let cr = header.indexOf(0x0d); cr >= 0; cr = header.indexOf(0x0d, cr + 1))
    if (header[cr + 1] !== 0x0a) return 'a bare CR in the header';
  let cost = 0;
  let dkim = 0;
  let arc = 0;
  // The next colon, looked for again only once a field starts past it: one pass, however few lines hold one.
  let colon = header.indexOf(0x3a);
  for (const [start, end] of fieldSpans(header)) {
    if (colon !== -1 && colon < start) colon = header.indexOf(0x3a, start);
    const name = colon > start && colon < end ? header.toString('latin1', start, colon).trim().toLowerCase() : '';
    if (PARSED.has(name)) {
      const length = end - start;
      cost += length * length;
      if (name === 'dkim-signature') dkim++;
      else if (name.startsWith('arc-')) arc++;
    }
  }
  if (dkim > MAX_DKIM_SIGNATURES) return `${dkim} DKIM signatures (at most ${MAX_DKIM_SIGNATURES} are verified)`;
  if (arc > MAX_ARC_FIELDS) return `${arc} ARC fields (at most ${MAX_ARC_FIELDS})`;
  if (cost > AUTH_FIELD_BUDGET) return 'header fields too long to authenticate';
  return null;
}
