// VERP return paths (docs/decisions.md #10, #53): every message goes out with MAIL FROM
// b-<message uuid, 32 hex digits>-<tag, 12 hex digits>@<return-path domain>, so a bounce (RFC 3464 DSN) or
// complaint (RFC 5965 ARF) that reaches that mailbox names its message by the address alone, whatever the
// remote MTA quotes of the original. The tag is an HMAC of the id and the domain under a key of the
// service's: nobody can make a return path up from a message id (48 bits: one right guess in 2^48 RCPTs),
// and the MX checks it before it looks anything up. Addresses of before the tag (b-<id>@domain) still
// decode, with a null tag; only the message sent from exactly that address accepts them. Pure: the HMAC
// is passed in, no storage, no DNS.
import { timingSafeEqual } from 'node:crypto';
import { normalizeDomain } from './domain-names.js';
import { isUuid } from './uuid.js';

const PREFIX = 'b-';
// The local part we write, matched case-insensitively: RFC 5321 §2.4 lets a local part be
// case-sensitive, but some MTAs and forwarders change its case anyway, and ours never differs by case.
const LOCAL = /^b-([0-9a-f]{32})(?:-([0-9a-f]{12}))?$/i;
const TAG_HEX = 12;

/** The HMAC (hex) of a string under the return-path key (storage/secrets.ts `mac`). */
export type ReturnPathMac = (payload: string) => string;

/** The return-path HMAC of a key holder (the storage handle's sealer). */
export const returnPathMac =
  (keys: { mac(purpose: string, data: string): string }): ReturnPathMac =>
  (payload) =>
    keys.mac('return-path', payload);

const tagOf = (mac: ReturnPathMac, idHex: string, domain: string) =>
  mac(`verp:${idHex}@${domain}`).slice(0, TAG_HEX).toLowerCase();
/** RFC 5321 §4.5.3.1.3: a path is 256 octets with its angle brackets, so a mailbox is at most 254. */
const MAX_ADDRESS_LENGTH = 254;

/** A return-path domain as given, lower-cased, when it is a valid host name already in ASCII form. */
function asciiDomain(raw: string): string | null {
  const d = normalizeDomain(raw);
  // normalizeDomain trims, drops a trailing dot and converts IDN: none of that is allowed to happen
  // silently in an address we write or read back.
  return d !== null && d === raw.toLowerCase() ? d : null;
}

/**
 * `b-<uuid without dashes>-<tag>@<returnPathDomain>`; throws on a message id that is not a UUID or a bad domain.
 */
export function encodeReturnPath(messageId: string, returnPathDomain: string, mac: ReturnPathMac): string {
  if (!isUuid(messageId)) throw new Error(`verp: message id ${JSON.stringify(messageId)} is not a UUID`);
  const domain = asciiDomain(returnPathDomain);
  if (!domain) throw new Error(`verp: ${JSON.stringify(returnPathDomain)} is not a return-path domain`);
  const idHex = messageId.replace(/-/g, '').toLowerCase();
  const address = `${PREFIX}${idHex}-${tagOf(mac, idHex, domain)}@${domain}`;
  if (address.length > MAX_ADDRESS_LENGTH)
    throw new Error('verp: return path longer than 254 octets (RFC 5321 §4.5.3.1.3)');
  return address;
}

export interface DecodedReturnPath {
  /** Dashed, lower case. */
  messageId: string;
  /** Lower case. */
  domain: string;
  /** Whether the address carries a tag and it is ours; null for an address of before the tag. */
  signed: boolean | null;
}

/**
 * The message a VERP address names, the domain it was sent to, and whether its tag is right (checked in
 * constant time); null for anything that encodeReturnPath cannot have produced, now or before the tag.
 */
export function decodeReturnPath(address: string, mac: ReturnPathMac): DecodedReturnPath | null {
  if (typeof address !== 'string' || address.length > MAX_ADDRESS_LENGTH) return null;
  const at = address.indexOf('@');
  if (at < 0 || address.indexOf('@', at + 1) >= 0) return null;
  const local = LOCAL.exec(address.slice(0, at));
  if (!local) return null;
  const domain = asciiDomain(address.slice(at + 1));
  if (!domain) return null;
  const h = (local[1] as string).toLowerCase();
  const messageId = `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
  const given = local[2]?.toLowerCase();
  const signed = given === undefined ? null : timingSafeEqual(Buffer.from(given), Buffer.from(tagOf(mac, h, domain)));
  return { messageId, domain, signed };
}
