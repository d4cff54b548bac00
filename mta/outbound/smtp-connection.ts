// nodemailer's SMTP client (pinned 10.6.0 in package.json) with the message made transparent for DATA by
// mail/smtp-data.ts instead of its DataStream's octet loop, which cost about 0.6 ms a 100 kB message (the
// largest single cost of sending one). The bytes on the wire are the same. nodemailer has no option for it, so
// this reaches one internal: `_createSendStream`, which makes the DataStream of each send and pipes it to the
// socket; the stream it returns gets our `_transform` and keeps the rest (its byte counts, its `_flush`, which
// writes the terminating dot). test/mail/smtp-data.test.ts fails if a release drops or reshapes that method,
// so the pin moves only with it (docs/decisions.md #63).
import type { Transform, TransformCallback } from 'node:stream';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { dotStuff } from '../../mail/smtp-data.js';

/** The fields of nodemailer's DataStream that its `_transform` keeps and its `_flush` reads. */
interface DataStream extends Transform {
  inByteCount: number;
  outByteCount: number;
  lastByte: number | false;
}

/** DataStream's `_transform`, by dotStuff. */
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
  this.push(out);
  this.lastByte = buf[buf.length - 1]!;
  done();
}

type Internals = { _createSendStream(callback: unknown): DataStream };

export class SmtpConnection extends SMTPConnection {
  /** nodemailer's internal (see above): its stream, with our transform. */
  _createSendStream(callback: unknown): DataStream {
    const stream = (SMTPConnection.prototype as unknown as Internals)._createSendStream.call(this, callback);
    stream._transform = transparentTransform;
    return stream;
  }
}
