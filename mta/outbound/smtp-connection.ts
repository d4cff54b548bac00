// nodemailer's SMTP client (pinned 10.6.0 in package.json) with the message made transparent for DATA by
// mail/smtp-data.ts instead of its DataStream's octet loop, which cost about 0.6 ms a 100 kB message (the
// largest single cost of sending one). The bytes on the wire are the same. nodemailer has no option for it, so
// this reaches one internal: `_createSendStream`, which makes the DataStream of each send and pipes it to the
// socket; the stream it returns gets our `_transform` and `_flush` (the terminating dot, written with the last
// chunk) and keeps the rest (its byte counts, which ours keep up). test/mail/smtp-data.test.ts fails if a release
// drops or reshapes that method, so the pin moves only with it (docs/decisions.md #63).
import type { Transform, TransformCallback } from 'node:stream';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { dotStuff } from '../../mail/smtp-data.js';

/** The fields of nodemailer's DataStream that its `_transform` keeps and its `_flush` reads, and our held chunk. */
interface DataStream extends Transform {
  inByteCount: number;
  outByteCount: number;
  lastByte: number | false;
  held?: Buffer | null;
}

/**
 * DataStream's `_transform`, by dotStuff. The chunk made transparent is held back until the next one, or the end:
 * a message written whole (as the MTA writes each) then reaches the socket in one write with its terminating dot.
 */
export function transparentTransform(
  this: DataStream,
  chunk: Buffer | string,
  _enc: BufferEncoding,
  done: TransformCallback,
) {
  if (!chunk || !chunk.length) return done();
  const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
  this.inByteCount += buf.length;
  const out = dotStuff(buf, this.lastByte === false ? null : this.lastByte);
  this.outByteCount += out.length;
  if (this.held) this.push(this.held);
  this.held = out;
  this.lastByte = buf[buf.length - 1]!;
  done();
}

const DOT_CRLF = Buffer.from('.\r\n');
const LF_DOT_CRLF = Buffer.from('\n.\r\n');
const CRLF_DOT_CRLF = Buffer.from('\r\n.\r\n');
/** Up to this size the held chunk is copied to go out with the dot in one write; a larger one goes on its own. */
const JOIN_LIMIT = 64 * 1024;

/**
 * DataStream's `_flush`: the held chunk and the end of the data (RFC 5321 §4.1.1.4), a CRLF first unless the
 * message ended its last line (nodemailer's rule, whose bytes these are). One socket write instead of two a
 * message: on loopback a write costs the sender the receiver's TCP work too.
 */
export function transparentFlush(this: DataStream, done: TransformCallback) {
  const end = this.lastByte === 0x0a ? DOT_CRLF : this.lastByte === 0x0d ? LF_DOT_CRLF : CRLF_DOT_CRLF;
  this.outByteCount += end.length;
  const held = this.held;
  this.held = null;
  if (held && held.length <= JOIN_LIMIT) this.push(Buffer.concat([held, end], held.length + end.length));
  else {
    if (held) this.push(held);
    this.push(end);
  }
  done();
}

/** nodemailer's DataStream with our transform and flush in place of its own. */
export function makeTransparent<S extends Transform>(stream: S): S {
  stream._transform = transparentTransform;
  stream._flush = transparentFlush;
  return stream;
}

type Internals = { _createSendStream(callback: unknown): DataStream };

export class SmtpConnection extends SMTPConnection {
  /** nodemailer's internal (see above): its stream, with our transform and flush. */
  _createSendStream(callback: unknown): DataStream {
    return makeTransparent((SMTPConnection.prototype as unknown as Internals)._createSendStream.call(this, callback));
  }
}
