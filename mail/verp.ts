// VERP return paths (docs/decisions.md #10): every message goes out with MAIL FROM
// b-<message uuid, 32 hex digits>@<return-path domain>, so a bounce (RFC 3464 DSN) or complaint
// (RFC 5965 ARF) that reaches that mailbox names its message by the address alone, whatever the
// remote MTA quotes of the original. Pure: no storage, no DNS.
//
// No signature in the local part: the id is a random UUID that only the recipient of the message
// sees, and what a forged report can do with it is mark that one message of theirs.
import { normalizeDomain } from './domain-names.js';
import { isUuid } from './uuid.js';

const PREFIX = 'b-';
// The local part we write, matched case-insensitively: RFC 5321 §2.4 lets a local part be
// case-sensitive, but some MTAs and forwarders change its case anyway, and ours never differs by case.
const LOCAL = /^b-([0-9a-f]{32})$/i;
/** RFC 5321 §4.5.3.1.3: a path is 256 octets with its angle brackets, so a mailbox is at most 254. */
const MAX_ADDRESS_LENGTH = 254;

/** A return-path domain as given, lower-cased, when it is a valid host name already in ASCII form. */
function asciiDomain(raw: string): string | null {
  const d = normalizeDomain(raw);
  // normalizeDomain trims, drops a trailing dot and converts IDN: none of that is allowed to happen
  // silently in an address we write or read back.
  return d !== null && d === raw.toLowerCase() ? d : null;
}

/** `b-<uuid without dashes>@<returnPathDomain>`; throws on a message id that is not a UUID or a bad domain. */
export function encodeReturnPath(messageId: string, returnPathDomain: string): string {
  if (!isUuid(messageId)) throw new Error(`verp: message id ${JSON.stringify(messageId)} is not a UUID`);
  const domain = asciiDomain(returnPathDomain);
  if (!domain) throw new Error(`verp: ${JSON.stringify(returnPathDomain)} is not a return-path domain`);
  const address = `${PREFIX}${messageId.replace(/-/g, '').toLowerCase()}@${domain}`;
  if (address.length > MAX_ADDRESS_LENGTH)
    throw new Error('verp: return path longer than 254 octets (RFC 5321 §4.5.3.1.3)');
  return address;
}

/**
 * The message a VERP address names, and the domain it was sent to: { messageId (dashed, lower
 * case), domain (lower case) }; null for anything that encodeReturnPath cannot have produced.
 */
export function decodeReturnPath(address: string): { messageId: string; domain: string } | null {
  if (typeof address !== 'string' || address.length > MAX_ADDRESS_LENGTH) return null;
  const at = address.indexOf('@');
  if (at < 0 || address.indexOf('@', at + 1) >= 0) return null;
  const local = LOCAL.exec(address.slice(0, at));
  if (!local) return null;
  const domain = asciiDomain(address.slice(at + 1));
  if (!domain) return null;
  const h = (local[1] as string).toLowerCase();
  const messageId = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  return { messageId, domain };
}
