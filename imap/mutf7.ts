// Modified UTF-7 for mailbox names (RFC 3501 §5.1.3): printable US-ASCII (0x20-0x7e) stands for itself
// except "&", written "&-"; every other character goes as UTF-16BE in modified BASE64 (RFC 2045 BASE64
// with "," for "/" and no padding) between "&" and "-". Pure; no I/O.

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+,';
const B64_VALUE = new Map([...B64].map((c, i) => [c, i]));

function printable(code: number): boolean {
  return code >= 0x20 && code <= 0x7e;
}

/** A mailbox name (any Unicode string) as it goes on the wire. */
export function encodeMutf7(name: string): string {
  let out = '';
  let run: number[] = []; // UTF-16 code units waiting to be encoded
  const flush = (): void => {
    if (run.length === 0) return;
    const bytes = Buffer.alloc(run.length * 2);
    run.forEach((unit, i) => bytes.writeUInt16BE(unit, i * 2));
    out += '&' + bytes.toString('base64').replace(/=+$/, '').replace(/\//g, ',') + '-';
    run = [];
  };
  for (let i = 0; i < name.length; i++) {
    const unit = name.charCodeAt(i);
    if (printable(unit)) {
      flush();
      out += unit === 0x26 ? '&-' : name[i];
    } else {
      run.push(unit);
    }
  }
  flush();
  return out;
}

/**
 * The Unicode name a modified UTF-7 string stands for, or null when it is not one an RFC 3501 §5.1.3
 * encoder can have written: an unterminated shift, a character outside 0x20-0x7e, BASE64 that encodes a
 * printable ASCII character ("MUST NOT be used to represent any printing US-ASCII character"), an odd
 * number of octets, non-zero padding bits, or a lone surrogate.
 */
export function decodeMutf7(text: string): string | null {
  let out = '';
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (!printable(c)) return null;
    if (c !== 0x26) {
      out += text[i];
      i++;
      continue;
    }
    const end = text.indexOf('-', i + 1);
    if (end < 0) return null;
    if (end === i + 1) {
      out += '&';
      i = end + 1;
      continue;
    }
    const decoded = decodeRun(text.slice(i + 1, end));
    if (decoded === null) return null;
    out += decoded;
    i = end + 1;
  }
  return out;
}

function decodeRun(b64: string): string | null {
  let bits = 0;
  let nbits = 0;
  const units: number[] = [];
  let pending = -1; // first octet of a UTF-16 code unit
  for (const ch of b64) {
    const v = B64_VALUE.get(ch);
    if (v === undefined) return null;
    bits = (bits << 6) | v;
    nbits += 6;
    if (nbits >= 8) {
      nbits -= 8;
      const octet = (bits >> nbits) & 0xff;
      bits &= (1 << nbits) - 1;
      if (pending < 0) pending = octet;
      else {
        units.push((pending << 8) | octet);
        pending = -1;
      }
    }
  }
  // Leftover bits are padding: fewer than 6 of them, all zero, and no half code unit.
  if (pending >= 0 || nbits >= 6 || bits !== 0 || units.length === 0) return null;
  let out = '';
  for (let k = 0; k < units.length; k++) {
    const u = units[k] as number;
    if (printable(u)) return null;
    if (u >= 0xd800 && u <= 0xdbff) {
      const low = units[k + 1];
      if (low === undefined || low < 0xdc00 || low > 0xdfff) return null;
      out += String.fromCharCode(u, low);
      k++;
    } else if (u >= 0xdc00 && u <= 0xdfff) {
      return null;
    } else {
      out += String.fromCharCode(u);
    }
  }
  return out;
}
