// nodemailer's SMTP client (pinned 10.6.0 in package.json) with the DATA of a message given whole (a Buffer, as
// the MTA gives every message) written by us: made transparent by mail/smtp-data.ts and put on the socket with its
// terminating dot in one corked write. nodemailer pipes every message through a DataStream of its own, a Transform
// made, piped to the socket and torn down for each message, whose octet loop cost about 0.6 ms a 100 kB message; our
// transform in its place still cost the stream's machinery and a second write for a large message (docs/decisions.md
// #63 has the figures; bench/smtp-client.ts measures the client beside nodemailer's). The bytes on the wire are the
// same. nodemailer has no option for it, so this reaches its internals: `_createSendStream`, which makes that stream
// when the server has answered DATA with 354 and returns it to `send`, which writes the message into it and reads its
// `outByteCount`; `_responseActions`, where the handler of the reply to the data is queued; `_actionSMTPStream`, that
// handler; and `_socket`. A message given as a stream (or a session speaking LMTP, which answers the data once per
// recipient) goes through nodemailer's own DataStream, unchanged. test/mail/smtp-data.test.ts fails if a release
// drops or reshapes one of them, so the pin moves only with it.
import type { Socket } from 'node:net';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { dotStuff } from '../../mail/smtp-data.js';

const DOT_CRLF = Buffer.from('.\r\n');
const LF_DOT_CRLF = Buffer.from('\n.\r\n');
const CRLF_DOT_CRLF = Buffer.from('\r\n.\r\n');

/**
 * The end of the data (RFC 5321 §4.1.1.4) after a message whose last octet is `last` (null: an empty message): a CRLF
 * first unless the message ended its last line, an LF after a bare CR (which the transparency makes a line end).
 * nodemailer's rule, whose bytes these are.
 */
function dataEnd(last: number | null): Buffer {
  return last === 0x0a ? DOT_CRLF : last === 0x0d ? LF_DOT_CRLF : CRLF_DOT_CRLF;
}

/** What `send` uses of the stream `_createSendStream` returns, for a message given as a Buffer. */
export interface DataSink {
  outByteCount: number;
  write(chunk: Buffer): boolean;
  end(): void;
}

/**
 * The data of one message onto `socket`: each chunk written made transparent (dotStuff, which carries a line's start
 * across chunks by the last octet of the one before), held until `end`, then all of it and the end of the data
 * corked into one write (a writev: nothing is copied to join them).
 */
export function dataSink(socket: Pick<Socket, 'cork' | 'uncork' | 'write'>): DataSink {
  const held: Buffer[] = [];
  let last: number | null = null;
  return {
    outByteCount: 0,
    write(chunk) {
      if (!chunk.length) return true;
      const out = dotStuff(chunk, last);
      this.outByteCount += out.length;
      held.push(out);
      last = chunk[chunk.length - 1]!;
      return true;
    },
    end() {
      const end = dataEnd(last);
      this.outByteCount += end.length;
      socket.cork();
      for (const b of held) socket.write(b);
      socket.write(end);
      socket.uncork();
      held.length = 0;
    },
  };
}

/** nodemailer's internals this module reaches (above). */
interface Internals {
  _socket: Socket;
  _responseActions: ((str: string) => void)[];
  _actionSMTPStream(str: string, callback: unknown): void;
  _createSendStream(callback: unknown): unknown;
  options: { lmtp?: boolean };
}

const nodemailers = SMTPConnection.prototype as unknown as Internals;

export class SmtpConnection extends SMTPConnection {
  /** Whether the message of the send in progress was given whole, and its data is written by dataSink. */
  private whole = false;

  override send(...[envelope, message, callback]: Parameters<SMTPConnection['send']>): void {
    this.whole = Buffer.isBuffer(message);
    super.send(envelope, message, callback);
  }

  /** At the server's 354: what `send` writes the message into (see above). */
  _createSendStream(callback: unknown): unknown {
    const self = this as unknown as Internals;
    if (!this.whole || self.options.lmtp) return nodemailers._createSendStream.call(this, callback);
    self._responseActions.push((str) => self._actionSMTPStream(str, callback));
    return dataSink(self._socket);
  }
}
