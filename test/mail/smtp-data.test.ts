// mail/smtp-data.ts and mta/outbound/smtp-connection.ts: our DATA transparency writes nodemailer's DataStream's
// bytes for every input and chunking, and the SMTP client the MTA uses puts those bytes on the wire (so the one
// nodemailer internal it reaches, `_createSendStream`, is still there and still used).
import t, { type Test } from 'tap';
import net from 'node:net';
import path from 'node:path';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Readable, type Transform } from 'node:stream';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { dotStuff, markCrlfOnly } from '../../mail/smtp-data.js';
import { dataSink, SmtpConnection } from '../../mta/outbound/smtp-connection.js';
import { randomOf, seeded } from '../helpers/seeded.js';

const require = createRequire(import.meta.url);
// DataStream is not among nodemailer's exports; it sits beside the client's module.
const dataStreamFile = path.join(path.dirname(require.resolve('nodemailer/lib/smtp-connection')), 'data-stream.js');
const { default: DataStream } = (await import(pathToFileURL(dataStreamFile).href)) as {
  default: new () => Transform;
};

const PIECES = ['a', 'xyz', '.', '..', '\r', '\n', '\r\n', '\r\n.', '\n.', '\r.', '\r\r\n', 'é', '\0', ' '];

/** Writes `chunks` through a stream and resolves with everything it pushed (its flush included). */
function through(stream: Transform, chunks: Buffer[]): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const out: Buffer[] = [];
    stream.on('data', (b: Buffer) => out.push(b));
    stream.on('end', () => resolve(Buffer.concat(out)));
    stream.on('error', reject);
    for (const c of chunks) stream.write(c);
    stream.end();
  });
}

/** `whole` cut into up to 4 chunks at random places, so that CRs, LFs and dots fall at chunk edges. */
function cutRandomly(whole: Buffer, rnd: () => number): Buffer[] {
  const cuts = [...new Set(Array.from({ length: Math.floor(rnd() * 4) }, () => Math.floor(rnd() * whole.length)))];
  cuts.sort((a, b) => a - b);
  return [0, ...cuts].map((c, k) => whole.subarray(c, k < cuts.length ? cuts[k] : whole.length));
}

/** A socket's writing side that keeps what is written to it, and says which writes went out corked together. */
function capture() {
  const writes: { bytes: Buffer; batch: number }[] = [];
  let corked = 0;
  let batch = 0;
  return {
    writes,
    cork: () => void (corked++ || batch++),
    uncork: () => void corked--,
    write: (b: Buffer) => writes.push({ bytes: b, batch: corked ? batch : ++batch }) > 0,
  };
}

/** `chunks` through dataSink, what SmtpConnection sends a message given whole through: everything it wrote. */
function ours(chunks: Buffer[]): Buffer {
  const socket = capture();
  const sink = dataSink(socket);
  for (const c of chunks) sink.write(c);
  sink.end();
  const out = Buffer.concat(socket.writes.map((w) => w.bytes));
  if (sink.outByteCount !== out.length) throw new Error(`outByteCount ${sink.outByteCount}, written ${out.length}`);
  return out;
}

t.test('dotStuff gives DataStream bytes for random input, in random chunks', async (t) => {
  const rnd = seeded(7);
  let mismatches = 0;
  for (let i = 0; i < 3000; i++) {
    const s = randomOf(rnd, PIECES, 40);
    const whole = Buffer.from(s);
    const chunks = cutRandomly(whole, rnd);
    const [theirs, mine] = [await through(new DataStream(), chunks), ours(chunks)];
    if (!mine.equals(theirs) && mismatches++ < 3)
      t.fail(`${JSON.stringify(s)} in ${chunks.length}: ${JSON.stringify(mine.toString())}`);
  }
  t.equal(mismatches, 0, '3000 random messages');
});

t.test('dotStuff gives DataStream bytes for messages of CRLF lines, dots opening many, in random chunks', async (t) => {
  const rnd = seeded(9);
  const words = ['Lorem ipsum dolor sit amet,', 'consectetur', 'adipiscing elit', '.', '..', 'é', ' ', '\t'];
  let mismatches = 0;
  for (let i = 0; i < 1000; i++) {
    const lines: string[] = [];
    for (let l = Math.floor(rnd() * 80); l > 0; l--) {
      let line = rnd() < 0.2 ? '.' : '';
      for (let w = Math.floor(rnd() * 8); w > 0; w--) line += words[Math.floor(rnd() * words.length)];
      lines.push(line);
    }
    const whole = Buffer.from(lines.join('\r\n') + (rnd() < 0.5 ? '\r\n' : ''));
    // Whole in half of them, as the MTA writes.
    const chunks = i % 2 ? cutRandomly(whole, rnd) : [whole];
    const [theirs, mine] = [await through(new DataStream(), chunks), ours(chunks)];
    if (!mine.equals(theirs) && mismatches++ < 3) t.fail(`${JSON.stringify(whole.toString())} in ${chunks.length}`);
  }
  t.equal(mismatches, 0, '1000 messages');
});

t.test('a message marked CRLF-only gets the same bytes by its shorter path', async (t) => {
  const rnd = seeded(11);
  const pieces = ['a', 'xyz', '.', '..', '\r\n', '\r\n.', '\r\n..', ' ', 'é'];
  let mismatches = 0;
  for (let i = 0; i < 3000; i++) {
    const s = randomOf(rnd, pieces, 40);
    const plain = Buffer.from(s);
    // After an LF, at the start, after another octet, and after a CR (where only the general path judges).
    for (const prev of [null, 0x0a, 0x61, 0x0d]) {
      const mine = dotStuff(markCrlfOnly(Buffer.from(s)), prev);
      if (!mine.equals(dotStuff(plain, prev)) && mismatches++ < 3) t.fail(`${JSON.stringify(s)} after ${prev}`);
    }
    // Given whole, as the MTA gives it: DataStream's bytes.
    const theirs = await through(new DataStream(), [plain]);
    if (!ours([markCrlfOnly(Buffer.from(s))]).equals(theirs) && mismatches++ < 3) t.fail(`${JSON.stringify(s)} whole`);
  }
  t.equal(mismatches, 0, '3000 messages');
  // The mark is of the buffer itself: another with the same bytes is not marked.
  const marked = markCrlfOnly(Buffer.from('.a\r\n.b\r\n'));
  t.equal(dotStuff(marked, null).toString(), '..a\r\n..b\r\n');
  t.equal(dotStuff(Buffer.from('a\nb'), null).toString(), 'a\r\nb', 'unmarked: a lone LF still gets its CR');
});

t.test('a message given whole leaves in one corked write with its end, uncopied', async (t) => {
  for (const size of [0, 1000, 64 * 1024 + 1, 1024 * 1024]) {
    const socket = capture();
    const sink = dataSink(socket);
    const message = Buffer.alloc(size, 'a');
    if (size) sink.write(message);
    t.equal(socket.writes.length, 0, `${size} octets: nothing written before the end`);
    sink.end();
    t.same(new Set(socket.writes.map((w) => w.batch)).size, 1, `${size} octets: one corked write`);
    t.ok(Buffer.concat(socket.writes.map((w) => w.bytes)).equals(Buffer.concat([message, Buffer.from('\r\n.\r\n')])));
    if (size) t.equal(socket.writes[0]!.bytes, message, `${size} octets: the message itself, then the end`);
  }
  // Written in chunks: a dot that starts a chunk after an LF is doubled, and all of it goes with the end.
  const socket = capture();
  const sink = dataSink(socket);
  sink.write(Buffer.from('a\r\n'));
  sink.write(Buffer.from('.b\r\n'));
  sink.end();
  t.same(
    socket.writes.map((w) => [w.bytes.toString(), w.batch]),
    [
      ['a\r\n', 1],
      ['..b\r\n', 1],
      ['.\r\n', 1],
    ],
  );
});

t.test('dotStuff: the cases by name', async (t) => {
  const cases: [string, string, number | null, string][] = [
    ['CRLF text with nothing to change', 'a\r\nb\r\n', null, 'a\r\nb\r\n'],
    ['a dot opening the message', '.a', null, '..a'],
    ['a dot opening a line', 'a\r\n.b\r\n.\r\n', null, 'a\r\n..b\r\n..\r\n'],
    ['a bare LF', 'a\nb', null, 'a\r\nb'],
    ['a bare CR, then a dot', 'a\r.b', null, 'a\r\n..b'],
    ['a chunk after one that ended with CR', '\nx', 0x0d, '\nx'],
    ['a chunk after one that ended with a bare CR', '.x', 0x0d, '\n..x'],
    ['a dot opening a chunk after an LF', '.x', 0x0a, '..x'],
    ['a dot opening a chunk mid-line', '.x', 0x61, '.x'],
  ];
  for (const [what, input, prev, want] of cases) t.equal(dotStuff(Buffer.from(input), prev).toString(), want, what);
  const clean = Buffer.from('line\r\n'.repeat(100));
  t.equal(dotStuff(clean, null), clean, 'nothing to change: the chunk itself, not a copy');
});

/** A bare SMTP server (no extensions) that captures the octets after DATA up to and including the final dot. */
async function captureServer(t: Test): Promise<{ port: number; data: Promise<Buffer>[] }> {
  const data: Promise<Buffer>[] = [];
  const server = net.createServer((sock) => {
    let inData = false;
    let body: Buffer[] = [];
    let done: (b: Buffer) => void = () => {};
    let line = '';
    sock.write('220 capture.test\r\n');
    sock.on('data', (chunk: Buffer) => {
      if (inData) {
        body.push(chunk);
        const all = Buffer.concat(body);
        if (all.subarray(-5).toString() === '\r\n.\r\n') {
          inData = false;
          done(all);
          sock.write('250 ok\r\n');
        }
        return;
      }
      line += chunk.toString('latin1');
      for (let i; (i = line.indexOf('\r\n')) >= 0;) {
        const cmd = line.slice(0, i).toUpperCase();
        line = line.slice(i + 2);
        if (cmd === 'DATA') {
          inData = true;
          body = [];
          data.push(new Promise((r) => (done = r)));
          sock.write('354 go\r\n');
        } else if (cmd === 'QUIT') sock.end('221 bye\r\n');
        else sock.write('250 ok\r\n');
      }
    });
    sock.on('error', () => {});
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  t.teardown(() => new Promise<void>((r) => server.close(() => r())));
  return { port: (server.address() as net.AddressInfo).port, data };
}

async function sendWith(
  Client: typeof SMTPConnection,
  port: number,
  message: Buffer | Readable,
): Promise<SMTPConnection.SentMessageInfo> {
  const c = new Client({ host: '127.0.0.1', port, ignoreTLS: true, name: 'client.test' });
  await new Promise<void>((resolve, reject) => {
    c.once('error', reject);
    c.connect(() => resolve());
  });
  const info = await new Promise<SMTPConnection.SentMessageInfo>((resolve, reject) =>
    c.send({ from: 'a@x.test', to: ['b@y.test'] }, message, (err, info) => (err ? reject(err) : resolve(info))),
  );
  c.quit();
  return info;
}

t.test('SmtpConnection puts the bytes nodemailer would on the wire', async (t) => {
  const internals = SMTPConnection.prototype as unknown as Record<string, unknown>;
  for (const name of ['_createSendStream', '_actionSMTPStream'])
    t.type(internals[name], 'function', `nodemailer still has ${name}, which SmtpConnection reaches`);
  // What the client's _createSendStream gave send(): our sink for a Buffer, or this test proves nothing about it.
  const proto = SmtpConnection.prototype as unknown as { _createSendStream(cb: unknown): unknown };
  const made = proto._createSendStream;
  const given: unknown[] = [];
  proto._createSendStream = function (this: unknown, cb: unknown) {
    const s = made.call(this, cb);
    given.push(s);
    return s;
  };
  t.teardown(() => {
    proto._createSendStream = made;
  });
  const server = await captureServer(t);
  const message = Buffer.from(
    'Subject: dots\r\n\r\n.first\r\nbare LF\nthen .dot\n.after bare LF\r.after bare CR\r\n' +
      'x'.repeat(70_000) +
      '\r\n..\r\n.',
  );
  await sendWith(SMTPConnection, server.port, message);
  const info = await sendWith(SmtpConnection, server.port, message);
  // A message given as a stream: nodemailer's own DataStream, the same octets.
  await sendWith(SmtpConnection, server.port, Readable.from([message.subarray(0, 999), message.subarray(999)]));
  const [theirs, mine, streamed] = await Promise.all(server.data);
  t.ok(theirs!.length > message.length, 'the message was made transparent');
  t.ok(mine!.equals(theirs!), 'the same octets');
  t.ok(streamed!.equals(theirs!), 'the same octets from a stream');
  t.equal(info.messageSize, theirs!.length, 'messageSize counts the octets written');
  t.equal(given.length, 2);
  // By name: the test's DataStream is the CommonJS build's, the client's the ES module build's.
  const kinds = given.map((s) => (s as object).constructor.name);
  t.same(kinds, ['Object', 'DataStream'], "a Buffer: written by our sink; a stream: through nodemailer's DataStream");
});
