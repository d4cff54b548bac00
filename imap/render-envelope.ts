// FETCH ENVELOPE (RFC 3501 §7.4.2) from the envelope stored with each message (mail/mime-header.ts
// computed it once at insert): ten fields in a fixed order, NIL for an absent field, strings raw as
// the header holds them (encoded words are the client's to decode), quoting left to imap/response.ts.
import type { Envelope, EnvelopeAddress } from '../mail/mime-header.js';
import type { ImapValue } from './response.js';

/**
 * RFC 3501 §7.4.2: an address is (name adl mailbox host); a group is opened by an address whose host
 * is NIL and whose mailbox is the group name, and closed by one whose mailbox and host are both NIL.
 * The stored addresses already have that shape, group markers included.
 */
function addressValue(a: EnvelopeAddress): ImapValue {
  return [a.name, a.adl, a.mailbox, a.host];
}

/**
 * RFC 3501 §9 `env-from` etc.: "(" 1*address ")" / nil — the addresses side by side with no space
 * between them, "((...)(...))". An empty list is NIL, never "()".
 */
function addressList(list: readonly EnvelopeAddress[] | null): ImapValue {
  return list && list.length ? [{ kind: 'adjacent', values: list.map(addressValue) }] : null;
}

/**
 * RFC 3501 §7.4.2 ENVELOPE: date, subject, from, sender, reply-to, to, cc, bcc, in-reply-to,
 * message-id. Sender and Reply-To default to From when absent (the stored envelope already applied
 * that rule, mail/mime-header.ts envelopeOf).
 */
export function envelopeValue(env: Envelope): ImapValue {
  return [
    env.date,
    env.subject,
    addressList(env.from),
    addressList(env.sender ?? env.from),
    addressList(env.replyTo ?? env.from),
    addressList(env.to),
    addressList(env.cc),
    addressList(env.bcc),
    env.inReplyTo,
    env.messageId,
  ];
}
