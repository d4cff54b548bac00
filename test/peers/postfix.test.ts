// test/helpers/postfix.ts: a private Postfix receives what nodemailer's SMTP client and swaks send,
// hands it back byte for byte, scripts RCPT rejections, and fails loudly when mail does not come.
import t from 'tap';
import { execFile } from 'node:child_process';
import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';
import { dkimSign } from 'mailauth/lib/dkim/sign.js';
import SMTPConnection from 'nodemailer/lib/smtp-connection';
import { startPostfix, type PostfixPeer } from '../helpers/postfix.js';
import { verifyDkim } from '../helpers/dkim-verify.js';
import { waitFor } from '../helpers/wait-for.js';
import { FROM_SOURCES } from '../helpers/from-sources.js';

const run = promisify(execFile);

/**
 * One transaction over nodemailer's SMTP client; resolves with the accepted/rejected lists once the connection is
 * closed.
 */
async function send(
  pf: PostfixPeer,
  from: string,
  to: string[],
  message: Buffer,
): Promise<SMTPConnection.SentMessageInfo> {
  const conn = new SMTPConnection({ host: pf.host, port: pf.port, ignoreTLS: true, name: 'client.test' });
  const closed = new Promise<void>((resolve) => conn.once('end', resolve).on('error', () => resolve()));
  await new Promise<void>((resolve, reject) => conn.connect((err) => (err ? reject(err) : resolve())));
  try {
    return await new Promise((resolve, reject) =>
      conn.send({ from, to }, message, (err, info) => (err ? reject(err) : resolve(info))),
    );
  } finally {
    conn.quit();
    await closed;
  }
}

/** A bare SMTP dialogue: sends each command after the previous reply and returns every final reply line. */
function dialogue(port: number, commands: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const replies: string[] = [];
    const queue = [...commands];
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    s.setTimeout(5_000, () => s.destroy(new Error('dialogue timed out')));
    s.on('error', reject);
    s.on('close', () => resolve(replies));
    s.on('data', (d) => {
      buf += d.toString('latin1');
      let eol;
      while ((eol = buf.indexOf('\r\n')) >= 0) {
        const line = buf.slice(0, eol);
        buf = buf.slice(eol + 2);
        if (line[3] === '-') continue; // RFC 5321 §4.2.1: continuation of a multiline reply
        replies.push(line);
        const next = queue.shift();
        if (next === undefined) s.end();
        else s.write(`${next}\r\n`);
      }
    });
  });
}

// Bytes that a careless hop would change: trailing blanks, a leading dot (dot-stuffed on the wire),
// a folded header, 8-bit UTF-8, a line over Postfix's 2048-byte line_length_limit, a header Postfix
// drops by default (Bcc), no trailing blank line.
const MESSAGE = Buffer.from(
  [
    'From: Sender <sender@origin.test>',
    'To: bob@example.test, carol@example.test',
    'Bcc: hidden@example.test',
    'Subject: =?UTF-8?Q?byte_exact?=',
    'X-Folded: first part',
    '\tsecond part   ',
    'Message-ID: <peer-1@origin.test>',
    'MIME-Version: 1.0',
    'Content-Type: text/plain; charset=utf-8',
    'Content-Transfer-Encoding: 8bit',
    '',
    'line with trailing blanks   \t',
    '.a line that starts with a dot',
    '..two dots',
    'grüße, 日本語',
    'x'.repeat(5000),
    '',
    'last line',
  ].join('\r\n') + '\r\n',
  'utf8',
);

t.test('receives over nodemailer SMTP and returns the message byte for byte', async (t) => {
  const pf = await startPostfix(t, { domains: ['example.test'] });
  t.equal(pf.host, '127.0.0.1');
  t.ok(pf.port > 0);

  const info = await send(pf, 'sender@origin.test', ['bob@example.test', 'Carol@example.test'], MESSAGE);
  t.same(info.accepted.sort(), ['Carol@example.test', 'bob@example.test']);

  const msgs = await pf.waitForMessages(2);
  t.equal(msgs.length, 2, 'one delivery per recipient');
  t.same(msgs.map((m) => m.rcpt).sort(), ['Carol@example.test', 'bob@example.test'], 'rcpt as given in RCPT TO');
  for (const m of msgs) {
    t.equal(m.mailFrom, 'sender@origin.test');
    t.ok(m.original.equals(MESSAGE), `${m.rcpt}: original is the DATA sent, byte for byte`);
    t.ok(m.raw.subarray(m.raw.length - MESSAGE.length).equals(MESSAGE), 'raw ends with the message');
    const added = m.raw.subarray(0, m.raw.length - MESSAGE.length).toString('latin1');
    t.match(
      added,
      /^Return-Path: <sender@origin\.test>\r\nX-Original-To: \S+\r\nDelivered-To: \S+\r\nReceived: from client\.test /,
      'Postfix prepends only its own trace fields',
    );
    t.match(added, /\tby peer-postfix\.test \(Postfix\) with ESMTP id /);
    t.notOk(/(^|[^\r])\n/.test(m.raw.toString('latin1')), 'every line ends in CRLF');
  }
});

t.test('a DKIM signature survives the trip: python3-dkim verifies the delivered raw file', async (t) => {
  const pf = await startPostfix(t, { domains: ['example.test'] });
  const { privateKey } = generateKeyPairSync('ed25519');
  const p = createPublicKey(privateKey).export({ type: 'spki', format: 'der' }).subarray(-32).toString('base64');
  const { signatures, errors } = await dkimSign(MESSAGE, {
    signatureData: [
      {
        signingDomain: 'origin.test',
        selector: 'pf',
        privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }),
        algorithm: 'ed25519-sha256',
        canonicalization: 'simple/simple',
      },
    ],
  } as Parameters<typeof dkimSign>[1]);
  t.same(errors, []);
  await send(pf, 'sender@origin.test', ['bob@example.test'], Buffer.concat([Buffer.from(signatures), MESSAGE]));
  const [m] = await pf.waitForMessages(1);
  const txt = { 'pf._domainkey.origin.test': `v=DKIM1; k=ed25519; p=${p}` };
  t.same(
    (await verifyDkim(m!.raw, txt)).signatures.map((s) => s.ok),
    [true],
    'simple/simple still verifies on the raw file',
  );
});

t.test('receives what swaks sends; every domain by default', async (t) => {
  const pf = await startPostfix(t);
  const { stdout } = await run('swaks', [
    '--server',
    `${pf.host}:${pf.port}`,
    '--from',
    'swaks@origin.test',
    '--to',
    'anyone@anywhere.example',
    '--header',
    'Subject: from swaks',
    '--body',
    'swaks body line',
    '--helo',
    'swaks.test',
  ]);
  t.match(stdout, /250 2\.0\.0 Ok: queued as/);
  const [m] = await pf.waitForMessages(1);
  t.equal(m?.rcpt, 'anyone@anywhere.example');
  t.equal(m?.mailFrom, 'swaks@origin.test');
  t.match(
    m?.original.toString() ?? '',
    /^Date: .*\r\nTo: anyone@anywhere\.example\r\n[^]*Subject: from swaks\r\n[^]*\r\n\r\nswaks body line\r\n/,
  );
});

t.test('scripted RCPT replies, relay denial outside the domains, and nothing delivered for them', async (t) => {
  const pf = await startPostfix(t, {
    domains: ['example.test', 'second.test'],
    recipientReplies: {
      'gone@example.test': '550 5.1.1 no such user',
      'later@example.test': '450 4.2.0 try again later',
      'second.test': '550 5.7.1 domain closed',
    },
  });
  const replies = await dialogue(pf.port, [
    'EHLO client.test',
    'MAIL FROM:<sender@origin.test>',
    'RCPT TO:<gone@example.test>',
    'RCPT TO:<Later@Example.test>',
    'RCPT TO:<x@second.test>',
    'RCPT TO:<someone@elsewhere.test>',
    'RCPT TO:<ok@example.test>',
    'DATA',
    'Subject: only ok\r\n\r\nhello\r\n.',
    'QUIT',
  ]);
  t.match(replies[0], /^220 peer-postfix\.test ESMTP/);
  t.match(replies[3], /^550 5\.1\.1 <gone@example\.test>: Recipient address rejected: no such user/);
  t.match(
    replies[4],
    /^450 4\.2\.0 <Later@Example\.test>: Recipient address rejected: try again later/,
    'keys match case-insensitively',
  );
  t.match(
    replies[5],
    /^550 5\.7\.1 <x@second\.test>: Recipient address rejected: domain closed/,
    'a domain key covers the domain',
  );
  t.match(replies[6], /^554 5\.7\.1 <someone@elsewhere\.test>: Relay access denied/);
  t.match(replies[7], /^250 2\.1\.5/);
  t.match(replies[9], /^250 2\.0\.0 Ok: queued/);
  const msgs = await pf.waitForMessages(1);
  t.same(
    msgs.map((m) => m.rcpt),
    ['ok@example.test'],
  );
  t.equal(msgs[0]?.original.toString(), 'Subject: only ok\r\n\r\nhello\r\n');
});

t.test('waitForMessages fails with the log when the mail does not come', async (t) => {
  const pf = await startPostfix(t, { domains: ['example.test'] });
  await send(pf, 'sender@origin.test', ['one@example.test'], Buffer.from('Subject: one\r\n\r\nx\r\n'));
  await pf.waitForMessages(1);
  await t.rejects(
    pf.waitForMessages(2, 300),
    /timed out after 300 ms waiting for 2 message\(s\)[^]*delivered: 1[^]*status=sent/,
  );
  await t.rejects(
    send(pf, 'sender@origin.test', ['one@other.test'], Buffer.from('Subject: two\r\n\r\nx\r\n')),
    /Relay access denied/,
  );
  t.equal((await pf.messages()).length, 1, 'a refused message is not delivered');
});

t.test('instances in parallel are independent; stop frees the port and ends the master', async (t) => {
  const [a, b] = await Promise.all([
    startPostfix(t, { hostname: 'a.peer.test' }),
    startPostfix(t, { hostname: 'b.peer.test' }),
  ]);
  t.not(a.port, b.port);
  t.not(a.dir, b.dir);
  await send(a, 's@origin.test', ['to-a@example.test'], Buffer.from('Subject: a\r\n\r\na\r\n'));
  await send(b, 's@origin.test', ['to-b@example.test'], Buffer.from('Subject: b\r\n\r\nb\r\n'));
  t.same(
    (await a.waitForMessages(1)).map((m) => m.rcpt),
    ['to-a@example.test'],
  );
  t.same(
    (await b.waitForMessages(1)).map((m) => m.rcpt),
    ['to-b@example.test'],
  );
  t.match((await a.messages())[0]?.raw.toString(), /by a\.peer\.test \(Postfix\)/);

  await a.stop();
  await a.stop(); // idempotent
  await t.rejects(
    new Promise((resolve, reject) => net.connect(a.port, '127.0.0.1').on('connect', resolve).on('error', reject)),
    { code: 'ECONNREFUSED' },
    'nothing listens after stop',
  );
  t.equal((await a.messages()).length, 1, 'deliveries stay readable until teardown');
  t.same(
    (await b.waitForMessages(1)).map((m) => m.rcpt),
    ['to-b@example.test'],
    'the other instance still runs',
  );
  t.ok(existsSync(a.dir), 'the dir stays until teardown');
});

t.test('bad options are refused before anything starts', async (t) => {
  await t.rejects(startPostfix(t, { domains: [] }), /domains is empty/);
  await t.rejects(startPostfix(t, { domains: ['bad domain'] }), /bad domain/);
  await t.rejects(startPostfix(t, { recipientReplies: { 'x@example.test': 'OK' } }), /must be "4xx\|5xx/);
});

/** Runs startPostfix in a child node process that then ends as `end` says, without its teardown. */
async function orphan(end: string): Promise<{ dir: string; port: number }> {
  const helper = new URL('../helpers/postfix.ts', import.meta.url).href;
  const code = `import { startPostfix } from ${JSON.stringify(helper)};
const pf = await startPostfix({ teardown() {} });
console.log(JSON.stringify({ dir: pf.dir, port: pf.port }));
${end}`;
  const { stdout } = await run(process.execPath, [...FROM_SOURCES, '--input-type=module', '-e', code]).catch(
    (err: { stdout: string }) => err,
  );
  return JSON.parse(stdout) as { dir: string; port: number };
}

const answers = (port: number) =>
  new Promise<boolean>((resolve) =>
    net
      .connect(port, '127.0.0.1')
      .on('connect', function (this: net.Socket) {
        this.destroy();
        resolve(true);
      })
      .on('error', () => resolve(false)),
  );

t.test(
  'robust to leftovers: exit stops the masters, the next start sweeps what a SIGKILLed process left',
  async (t) => {
    const exited = await orphan('process.exit(0);');
    // The exit hook SIGKILLs synchronously; the kernel closes the socket a moment later.
    await waitFor(async () => !(await answers(exited.port)), { what: "the exited owner's postfix to stop listening" });
    t.pass('a process that exits without teardown takes its master down');

    // Another test process starting Postfix meanwhile may sweep the orphan first: either way it must go.
    const killed = await orphan("process.kill(process.pid, 'SIGKILL');");
    t.ok(!existsSync(killed.dir) || (await answers(killed.port)), 'after SIGKILL the master runs on, orphaned');

    await startPostfix(t);
    t.notOk(existsSync(killed.dir), 'the next start removed the orphan dir');
    t.notOk(existsSync(exited.dir), 'and the other');
    t.notOk(await answers(killed.port), 'and stopped the orphaned master');
  },
);
