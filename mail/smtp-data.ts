// The message as it goes over the wire after DATA (RFC 5321 §4.5.2 transparency, §2.3.8 line endings), a chunk
// at a time: a dot that starts a line is doubled, a bare CR or LF becomes CRLF, and a dot after a bare CR is
// doubled too (the CR becomes a line end, and a receiver that took a lone CR for one would otherwise read
// "\r.\r" as the end of the data: SMTP smuggling). Byte for byte what nodemailer's DataStream writes (its
// `_transform`), which looks at every octet in a JavaScript loop: about 0.6 ms for a 100 kB message, the
// largest single cost of sending one. Here only the octets around a CR or LF are looked at, found by native
// indexOf, so a 100 kB message of CRLF lines costs a few tens of µs, and a chunk with nothing to change is
// returned as it is, uncopied. test/mail/smtp-data.test.ts compares the two on random input and chunkings
// (docs/decisions.md #63).

const CR = 0x0d;
const LF = 0x0a;
const DOT = 0x2e;
const INSERT_CR = Buffer.from('\r');
const INSERT_LF = Buffer.from('\n');
const INSERT_LF_DOT = Buffer.from('\n.');
const INSERT_DOT = Buffer.from('.');

/**
 * One chunk of the message made transparent. `prev` is the last octet of the chunk before it, or null at the
 * start of the message (where a dot also starts a line).
 */
export function dotStuff(chunk: Buffer, prev: number | null): Buffer {
  const n = chunk.length;
  const parts: Buffer[] = [];
  let from = 0;
  let extra = 0;
  // The last position looked at: a position can be both "after a CR or LF" and "an LF", and is judged once.
  let judged = -1;
  const judge = (p: number) => {
    if (p <= judged || p >= n) return;
    judged = p;
    const b = chunk[p];
    const before = p > 0 ? chunk[p - 1] : prev;
    const insert =
      before === CR && b !== LF
        ? b === DOT
          ? INSERT_LF_DOT
          : INSERT_LF
        : b === LF && before !== CR
          ? INSERT_CR
          : b === DOT && (before === LF || before === null)
            ? INSERT_DOT
            : null;
    if (!insert) return;
    if (p > from) parts.push(chunk.subarray(from, p));
    parts.push(insert);
    extra += insert.length;
    from = p;
  };
  // Only the first octet and the octets at or just after a CR or LF can need anything.
  judge(0);
  let cr = chunk.indexOf(CR);
  let lf = chunk.indexOf(LF);
  while (cr !== -1 || lf !== -1) {
    const k = cr === -1 ? lf : lf === -1 ? cr : Math.min(cr, lf);
    if (k === lf) judge(k);
    judge(k + 1);
    if (k === cr) cr = chunk.indexOf(CR, k + 1);
    else lf = chunk.indexOf(LF, k + 1);
  }
  if (!parts.length) return chunk;
  if (from < n) parts.push(chunk.subarray(from));
  return Buffer.concat(parts, n + extra);
}
