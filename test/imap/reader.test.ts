// imap/reader.ts: lines, synchronising and non-synchronising literals, whole or fed byte by byte, and
// the limits: an over-long line or literal is refused and its bytes dropped as they arrive.
import t, { type Test } from 'tap';
import { CommandReader, type ReaderEvent, type ReaderLimits } from '../../imap/reader.js';

function feed(reader: CommandReader, wire: Buffer, chunk: number): ReaderEvent[] {
  const events: ReaderEvent[] = [];
  for (let i = 0; i < wire.length; i += chunk) {
    reader.push(wire.subarray(i, i + chunk));
    for (let e = reader.next(); e; e = reader.next()) events.push(e);
  }
  return events;
}

function summary(events: ReaderEvent[]): unknown[] {
  return events.map((e) => {
    if (e.kind === 'command') {
      return { lines: e.command.lines.map(String), literals: e.command.literals.map(String) };
    }
    if (e.kind === 'line') return { line: String(e.line) };
    return e;
  });
}

/** The same events whatever the chunking: whole, byte by byte, and in threes. */
function readEvery(t: Test, wire: string | Buffer, limits: Partial<ReaderLimits> = {}): unknown[] {
  const bytes = typeof wire === 'string' ? Buffer.from(wire, 'latin1') : wire;
  const whole = summary(feed(new CommandReader(limits), bytes, bytes.length || 1));
  t.same(summary(feed(new CommandReader(limits), bytes, 1)), whole, 'byte by byte gives the same events');
  t.same(summary(feed(new CommandReader(limits), bytes, 3)), whole, 'three bytes at a time too');
  return whole;
}

t.test('plain lines become commands; empty lines are skipped; a bare LF also ends a line', async (t) => {
  t.same(readEvery(t, 'a001 NOOP\r\n\r\na002 CAPABILITY\na003 LOGOUT\r\n'), [
    { lines: ['a001 NOOP'], literals: [] },
    { lines: ['a002 CAPABILITY'], literals: [] },
    { lines: ['a003 LOGOUT'], literals: [] },
  ]);
});

t.test('a synchronising literal asks for a continuation, then reads exactly n octets (RFC 3501 §7.5)', async (t) => {
  const wire = 'A001 LOGIN {11}\r\nFRED FOOBAR {7}\r\nfat man\r\n';
  t.same(readEvery(t, wire), [
    { kind: 'continue' },
    { kind: 'continue' },
    { lines: ['A001 LOGIN {11}', ' {7}', ''], literals: ['FRED FOOBAR', 'fat man'] },
  ]);
});

t.test('a literal may hold CRLF, braces and "{5}" without confusing the reader', async (t) => {
  const body = 'Subject: x\r\n\r\n{5}\r\nhello\r\n';
  const wire = `A003 APPEND saved-messages (\\Seen) {${body.length}}\r\n${body}\r\n`;
  t.same(readEvery(t, wire), [
    { kind: 'continue' },
    { lines: [`A003 APPEND saved-messages (\\Seen) {${body.length}}`, ''], literals: [body] },
  ]);
});

t.test('a non-synchronising literal (LITERAL+, RFC 7888 §3) sends no continuation', async (t) => {
  t.same(readEvery(t, 'a LOGIN {3+}\r\nbob {6+}\r\nsecret\r\nb NOOP\r\n'), [
    { lines: ['a LOGIN {3+}', ' {6+}', ''], literals: ['bob', 'secret'] },
    { lines: ['b NOOP'], literals: [] },
  ]);
});

t.test('expectLine() delivers the next line as is (AUTHENTICATE, IDLE DONE)', async (t) => {
  const reader = new CommandReader();
  reader.push(Buffer.from('a IDLE\r\nDONE\r\nb NOOP\r\n'));
  const first = reader.next();
  t.equal(first?.kind, 'command');
  reader.expectLine();
  const done = reader.next();
  t.same(done?.kind === 'line' && String(done.line), 'DONE');
  const next = reader.next();
  t.same(next?.kind === 'command' && String(next.command.lines[0]), 'b NOOP');
  t.equal(reader.next(), null);
});

t.test('a line over the limit is refused with its tag, and the session reads on', async (t) => {
  const long = 'x'.repeat(200);
  const events = readEvery(t, `a1 SEARCH TEXT ${long}\r\na2 NOOP\r\n`, { maxLineBytes: 100 });
  t.same(events, [
    { kind: 'refused', reason: 'line-too-long', tag: 'a1', name: 'SEARCH', limit: 100 },
    { lines: ['a2 NOOP'], literals: [] },
  ]);
  // Exactly at the limit is fine; the CRLF does not count.
  const exact = `a3 X ${'y'.repeat(95)}`;
  t.equal(exact.length, 100);
  t.same(readEvery(t, `${exact}\r\n`, { maxLineBytes: 100 }), [{ lines: [exact], literals: [] }]);
});

t.test('an over-long line that announces a non-synchronising literal has the literal dropped too', async (t) => {
  const wire = `a1 APPEND INBOX ${'f'.repeat(200)} {10+}\r\n0123456789\r\na2 NOOP\r\n`;
  t.same(readEvery(t, wire, { maxLineBytes: 100 }), [
    { kind: 'refused', reason: 'line-too-long', tag: 'a1', name: 'APPEND', limit: 100 },
    { lines: ['a2 NOOP'], literals: [] },
  ]);
});

t.test('a synchronising literal over the limit is refused before the client sends it', async (t) => {
  // RFC 3501 §7.5: no "+", so the client sends nothing more of the command.
  t.same(readEvery(t, 'a1 LOGIN {70000}\r\na2 NOOP\r\n'), [
    { kind: 'refused', reason: 'literal-too-big', tag: 'a1', name: 'LOGIN', limit: 65536 },
    { lines: ['a2 NOOP'], literals: [] },
  ]);
  // APPEND has the APPENDLIMIT instead, so the session can answer NO [TOOBIG] (RFC 7889 §2).
  t.same(readEvery(t, 'a3 APPEND INBOX {2001}\r\n', { appendLimit: 2000 }), [
    { kind: 'refused', reason: 'literal-too-big', tag: 'a3', name: 'APPEND', limit: 2000 },
  ]);
  t.same(readEvery(t, 'a4 APPEND INBOX {2000}\r\n', { appendLimit: 2000 }), [{ kind: 'continue' }]);
});

t.test('a non-synchronising literal over the limit is read and dropped, then refused', async (t) => {
  const wire = `a1 LOGIN {200+}\r\n${'p'.repeat(200)} {3+}\r\nabc\r\na2 NOOP\r\n`;
  t.same(readEvery(t, wire, { maxLiteralBytes: 100 }), [
    { kind: 'refused', reason: 'literal-too-big', tag: 'a1', name: 'LOGIN', limit: 100 },
    { lines: ['a2 NOOP'], literals: [] },
  ]);
});

t.test('too many literals, or too many literal octets in one command, are refused', async (t) => {
  const many = 'a1 SEARCH' + ' TEXT {1+}\r\nx'.repeat(5) + '\r\na2 NOOP\r\n';
  t.same(readEvery(t, many, { maxLiteralsPerCommand: 4 }), [
    { kind: 'refused', reason: 'too-many-literals', tag: 'a1', name: 'SEARCH', limit: 4 },
    { lines: ['a2 NOOP'], literals: [] },
  ]);
  const big = 'a1 SEARCH' + ' TEXT {60+}\r\n' + 'y'.repeat(60) + ' TEXT {60+}\r\n' + 'z'.repeat(60) + '\r\n';
  t.same(readEvery(t, big, { maxLiteralBytes: 100, maxCommandLiteralBytes: 100 }), [
    { kind: 'refused', reason: 'literal-too-big', tag: 'a1', name: 'SEARCH', limit: 100 },
  ]);
});

t.test('a 50 MB literal over the limit streams through without being buffered', async (t) => {
  const limit = 1024 * 1024;
  const reader = new CommandReader({ appendLimit: limit });
  const size = 50 * 1024 * 1024;
  const chunk = Buffer.alloc(64 * 1024, 0x61);
  let maxBuffered = 0;
  const events: ReaderEvent[] = [];
  const push = (b: Buffer): void => {
    reader.push(b);
    for (let e = reader.next(); e; e = reader.next()) events.push(e);
    maxBuffered = Math.max(maxBuffered, reader.bufferedBytes());
  };
  const heapBefore = process.memoryUsage().heapUsed;
  push(Buffer.from(`big APPEND INBOX {${size}+}\r\n`));
  for (let sent = 0; sent < size; sent += chunk.length) push(chunk.subarray(0, Math.min(chunk.length, size - sent)));
  push(Buffer.from('\r\nnext NOOP\r\n'));
  t.ok(maxBuffered <= limit, `the reader held at most ${maxBuffered} octets`);
  t.equal(maxBuffered, 0, 'in fact nothing: every chunk was dropped as it came');
  t.ok(process.memoryUsage().heapUsed - heapBefore < 20 * 1024 * 1024, 'the heap did not grow by the literal');
  t.same(summary(events), [
    { kind: 'refused', reason: 'literal-too-big', tag: 'big', name: 'APPEND', limit },
    { lines: ['next NOOP'], literals: [] },
  ]);
});

t.test('a 50 MB line with no end in sight is dropped as it comes', async (t) => {
  const reader = new CommandReader();
  const chunk = Buffer.alloc(64 * 1024, 0x62);
  reader.push(Buffer.from('t1 SEARCH TEXT '));
  let maxBuffered = 0;
  let events = 0;
  for (let sent = 0; sent < 50 * 1024 * 1024; sent += chunk.length) {
    reader.push(chunk);
    if (reader.next() !== null) events++;
    maxBuffered = Math.max(maxBuffered, reader.bufferedBytes());
  }
  t.equal(events, 0, 'no event until the line ends');
  t.ok(maxBuffered <= 8192 + 2, `at most a line's worth buffered (${maxBuffered})`);
  t.ok(reader.midCommand());
  reader.push(Buffer.from('\r\n'));
  t.same(reader.next(), { kind: 'refused', reason: 'line-too-long', tag: 't1', name: 'SEARCH', limit: 8192 });
});

t.test('an accepted literal is copied out of the socket chunk it arrived in', async (t) => {
  const reader = new CommandReader();
  const chunk = Buffer.from('a LOGIN {3+}\r\nbob {3+}\r\npwd\r\n');
  reader.push(chunk);
  const e = reader.next();
  t.equal(e?.kind, 'command');
  chunk.fill(0x5a);
  t.same(e?.kind === 'command' && e.command.literals.map(String), ['bob', 'pwd']);
});
