// The message as it goes over the wire after DATA (RFC 5321 §4.5.2 transparency, §2.3.8 line endings), a chunk
// at a time: a dot that starts a line is doubled, a bare CR or LF becomes CRLF, and a dot after a bare CR is
// doubled too (the CR becomes a line end, and a receiver that took a lone CR for one would otherwise read
// "\r.\r" as the end of the data: SMTP smuggling). Byte for byte what nodemailer's DataStream writes (its
// `_transform`), which looks at every octet in a JavaScript loop: about 0.6 ms for a 100 kB message, the
// largest single cost of sending one. Here only the octets around a CR or LF that needs something are looked at,
// found in one pass of a regular expression over a latin1 copy of the chunk (V8's own matcher; Buffer#indexOf once
// per line end, as before, cost more per call than a line: ~110-140 µs for a 100 kB message of 80-octet lines,
// 30-37 µs since), and a chunk with nothing to change is returned as it is, uncopied. test/mail/smtp-data.test.ts
// compares the two on random input and chunkings (docs/decisions.md #63).

const CR = 0x0d;
const LF = 0x0a;
const DOT = 0x2e;
const INSERT_CR = Buffer.from('\r');
const INSERT_LF = Buffer.from('\n');
const INSERT_LF_DOT = Buffer.from('\n.');
const INSERT_DOT = Buffer.from('.');
/** A CR not before an LF, an LF not after a CR, an LF before a dot: every place where judge() may insert. */
const SITES = /\r(?!\n)|(?<!\r)\n|\n\./g;

const LF_DOT = Buffer.from('\n.');

/**
 * Messages whose maker knows that they hold CR and LF only as CRLF pairs (the MTA's signer, which looked at every
 * line end for the body hash: mail/dkim-sign.ts): nothing in them needs a CR or an LF, so dotStuff looks only for the
 * dots that start a line, by Buffer#indexOf, with no latin1 copy and no regular expression (~5% of the MTA's CPU for a
 * 100 kB message). A buffer is looked up by identity: the stream hands the transform the buffer written to it.
 */
const crlfOnly = new WeakSet<Buffer>();

/** Marks `message` as holding CR and LF only as CRLF pairs (see crlfOnly); returns it. */
export function markCrlfOnly(message: Buffer): Buffer {
  crlfOnly.add(message);
  return message;
}

/**
 * One chunk of the message made transparent. `prev` is the last octet of the chunk before it, or null at the
 * start of the message (where a dot also starts a line).
 */
export function dotStuff(chunk: Buffer, prev: number | null): Buffer {
  // After a CR the chunk's first octet may need an LF: only the general path judges that.
  if (prev !== CR && crlfOnly.has(chunk)) return dotStuffCrlf(chunk, prev);
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
  // Only the first two octets and the octets at or just after a CR or LF can need anything, and of those only
  // what SITES matches from the second octet on (latin1: one character per octet, so positions are offsets).
  judge(0);
  if (n > 1 && (chunk[0] === CR || chunk[0] === LF)) judge(1);
  const text = chunk.toString('latin1');
  SITES.lastIndex = 1;
  for (let m = SITES.exec(text); m; m = SITES.exec(text)) {
    // A CR alone: the octet after it (the LF it gets, a dot doubled). An LF: itself (a bare one gets its CR) and
    // the dot after it.
    if (text.charCodeAt(m.index) === LF) judge(m.index);
    judge(m.index + 1);
  }
  if (!parts.length) return chunk;
  if (from < n) parts.push(chunk.subarray(from));
  return Buffer.concat(parts, n + extra);
}

/** dotStuff of a chunk marked crlfOnly, after an LF or at the start (`prev` not a CR): each dot that starts a line. */
function dotStuffCrlf(chunk: Buffer, prev: number | null): Buffer {
  const parts: Buffer[] = [];
  let from = 0;
  // A dot first in the chunk starts a line after an LF or at the start of the message; any other follows an LF.
  if (chunk[0] === DOT && (prev === null || prev === LF)) parts.push(INSERT_DOT);
  for (let p = chunk.indexOf(LF_DOT); p >= 0; p = chunk.indexOf(LF_DOT, p + 2)) {
    parts.push(chunk.subarray(from, p + 1), INSERT_DOT);
    from = p + 1;
  }
  if (!parts.length) return chunk;
  parts.push(chunk.subarray(from));
  return Buffer.concat(parts);
}
