// mail/smtp-reply.ts: the one SMTP reply type, its parsing and wire form, the named replies, and the
// hook wrapper, the last through a real smtp-server on 127.0.0.1:0 driven over a socket: a refusal we
// raise goes out as it is, and a hook that fails unexpectedly answers 451 4.3.0, not smtp-server's 550.
import t, { type Test } from 'tap';
import net from 'node:net';
import { SMTPServer, type SMTPServerOptions } from 'smtp-server';
import * as replies from '../../mail/smtp-reply.js';
import {
  LOCAL_ERROR,
  MAILBOX_UNKNOWN,
  parseReply,
  smtpHooks,
  SmtpReply,
  toSmtpServerError,
  type ErrorLog,
} from '../../mail/smtp-reply.js';

t.test('a reply: codes, text, temporary, and its wire form as the message', async (t) => {
  const r = new SmtpReply(451, '4.3.0', 'Try again later');
  t.ok(r instanceof Error, 'throwable');
  t.match(r, { code: 451, enhanced: '4.3.0', text: 'Try again later', temporary: true });
  t.equal(r.message, '451 4.3.0 Try again later');
  t.equal(new SmtpReply(550, null, 'Nope').message, '550 Nope', 'no enhanced code, none written');
  t.equal(new SmtpReply(550, '5.1.1', 'a\nb').message, '550-5.1.1 a\n550 5.1.1 b', 'RFC 2034 §4: codes on each line');
  for (const code of [250, 354, 550, 554]) t.equal(new SmtpReply(code, null, 'x').temporary, false, `${code}`);
  const w = MAILBOX_UNKNOWN.with('No such mailbox: ada@example.org');
  t.match(w, { code: 550, enhanced: '5.1.1', text: 'No such mailbox: ada@example.org' });
  t.equal(MAILBOX_UNKNOWN.text, 'No such mailbox here', 'with() leaves the constant alone');
});

t.test('parseReply: a received reply into code, enhanced code and text, and back', async (t) => {
  const raw = '550-5.1.1 The email account that you tried to reach does not exist.\n550 5.1.1 Please try again.';
  const r = parseReply(raw)!;
  t.match(r, { code: 550, enhanced: '5.1.1', temporary: false });
  t.equal(r.text, 'The email account that you tried to reach does not exist.\nPlease try again.');
  t.equal(r.message, raw, 'the wire form gives the reply back');
  t.match(parseReply('421 mx.example.org Service not available'), {
    code: 421,
    enhanced: null,
    text: 'mx.example.org Service not available',
    temporary: true,
  });
  t.match(parseReply('250 2.0.0 OK'), { code: 250, enhanced: '2.0.0', text: 'OK' });
  t.match(parseReply('554'), { code: 554, enhanced: null, text: '' });
  const mixed = parseReply('550-5.1.1 first\n550 5.7.1 second')!;
  t.equal(mixed.text, 'first\n5.7.1 second', 'a line with another enhanced code keeps it in its text');
  t.equal(parseReply('Service unavailable'), null, 'no reply code');
  t.equal(parseReply('55 x'), null, 'two digits are no reply code');
  t.equal(parseReply(''), null);
});

t.test('every named reply: an enhanced code of the class its basic code says (RFC 3463 §2, RFC 2034 §4)', async (t) => {
  const named = Object.entries(replies).filter((e): e is [string, SmtpReply] => e[1] instanceof SmtpReply);
  t.ok(named.length >= 5, `${named.length} named replies`);
  for (const [name, r] of named) {
    t.ok(replies.isEnhancedCode(r.enhanced), `${name}: ${r.enhanced} is an enhanced code`);
    t.equal(r.enhanced![0], String(r.code)[0], `${name}: ${r.code} ${r.enhanced}`);
    t.ok(r.code >= 400, `${name} is a refusal`);
  }
  t.match(LOCAL_ERROR, { code: 451, enhanced: '4.3.0', temporary: true });
});

t.test("toSmtpServerError: smtp-server's shape, the enhanced code leading the message", async (t) => {
  const e = toSmtpServerError(MAILBOX_UNKNOWN);
  t.equal(e.responseCode, 550);
  t.equal(e.message, '5.1.1 No such mailbox here');
  t.equal(toSmtpServerError(new SmtpReply(550, '5.1.1', 'a\nb')).message, '5.1.1 a b', 'one line');
  t.equal(toSmtpServerError(new SmtpReply(554, null, 'no')).message, 'no');
});

/** An smtp-server on 127.0.0.1:0 with `options`; closed at the end of the test. */
async function server(t: Test, options: SMTPServerOptions): Promise<number> {
  const s = new SMTPServer({ authOptional: true, disabledCommands: ['AUTH'], logger: false, ...options });
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => s.close(() => resolve())));
  return (s.server.address() as net.AddressInfo).port;
}

/** A line-level SMTP client: `say` sends a line and resolves with the complete reply to it. */
async function dial(t: Test, port: number) {
  const socket = net.connect(port, '127.0.0.1');
  t.teardown(() => void socket.destroy());
  let buffer = '';
  let waiting: ((reply: string) => void) | null = null;
  const lines: string[] = [];
  const check = () => {
    // RFC 5321 §4.2: the last line of a reply has a space (or nothing) after the code.
    const last = lines.findIndex((l) => /^\d{3}(?: |$)/.test(l));
    if (last < 0 || !waiting) return;
    const reply = lines.splice(0, last + 1).join('\n');
    const w = waiting;
    waiting = null;
    w(reply);
  };
  socket.on('data', (chunk: Buffer) => {
    buffer += chunk.toString('utf8');
    let i: number;
    while ((i = buffer.indexOf('\r\n')) >= 0) {
      lines.push(buffer.slice(0, i));
      buffer = buffer.slice(i + 2);
    }
    check();
  });
  const next = () =>
    new Promise<string>((resolve) => {
      waiting = resolve;
      check();
    });
  const greeting = await next();
  return {
    greeting,
    say(line: string) {
      socket.write(`${line}\r\n`);
      return next();
    },
  };
}

function recordingLog() {
  const logged: { obj: Record<string, unknown>; msg: string }[] = [];
  const log: ErrorLog = { error: (obj, msg) => void logged.push({ obj: obj as Record<string, unknown>, msg }) };
  return { log, logged };
}

t.test('through a real socket: an unexpected hook failure answers 451 4.3.0, a refusal as raised', async (t) => {
  const { log, logged } = recordingLog();
  const port = await server(
    t,
    smtpHooks(
      {
        async onRcptTo(address) {
          if (address.address.startsWith('boom@')) throw new Error('connection to the database lost');
          if (address.address.startsWith('nobody@')) throw MAILBOX_UNKNOWN;
        },
        async onData(stream) {
          for await (const _ of stream);
          throw new TypeError('cannot read properties of undefined');
        },
      },
      log,
    ),
  );
  const c = await dial(t, port);
  t.match(c.greeting, /^220 /);
  t.match(await c.say('EHLO client.test'), /^250/);
  t.match(await c.say('MAIL FROM:<a@client.test>'), /^250/);
  t.equal(await c.say('RCPT TO:<boom@mx.test>'), '451 4.3.0 Temporary failure, try again later', 'not 550');
  t.equal(await c.say('RCPT TO:<nobody@mx.test>'), '550 5.1.1 No such mailbox here', 'the SmtpReply raised');
  t.match(await c.say('RCPT TO:<ada@mx.test>'), /^250 /, 'accepted');
  t.match(await c.say('DATA'), /^354 /);
  t.equal(await c.say('Subject: x\r\n\r\nbody\r\n.'), '451 4.3.0 Temporary failure, try again later', 'DATA too');
  t.match(await c.say('QUIT'), /^221 /);
  t.same(
    logged.map((l) => [l.obj.hook, (l.obj.err as Error).message]),
    [
      ['onRcptTo', 'connection to the database lost'],
      ['onData', 'cannot read properties of undefined'],
    ],
    'each unexpected failure logged once, a refusal not at all',
  );
});

t.test('a hook that refuses without reading the message: the reply still follows the "."', async (t) => {
  const { log } = recordingLog();
  const port = await server(
    t,
    smtpHooks(
      {
        async onData() {
          throw new Error('refused before reading');
        },
      },
      log,
    ),
  );
  const c = await dial(t, port);
  await c.say('EHLO client.test');
  await c.say('MAIL FROM:<a@client.test>');
  await c.say('RCPT TO:<ada@mx.test>');
  t.match(await c.say('DATA'), /^354 /);
  t.equal(await c.say('Subject: x\r\n\r\nbody\r\n.'), '451 4.3.0 Temporary failure, try again later');
  t.match(await c.say('NOOP'), /^250 /, 'the session goes on');
});

t.test('without the wrapper smtp-server answers such a failure with a permanent 550 (the trap)', async (t) => {
  const port = await server(t, {
    onRcptTo(_address, _session, cb) {
      cb(new Error('connection to the database lost'));
    },
  });
  const c = await dial(t, port);
  await c.say('EHLO client.test');
  await c.say('MAIL FROM:<a@client.test>');
  t.match(await c.say('RCPT TO:<ada@mx.test>'), /^550 /, 'what smtpHooks exists to prevent');
});
