// Issue 12 item 15 and issue 15 item 4: each limit of the MX listener, through real sockets on loopback
// (127.0.0.2 and 127.0.0.3 are other clients): SIZE advertised and enforced, the recipient cap, the
// connection caps overall and per address, the idle timeout and the session deadline, STARTTLS with a
// certificate made here and swapped on SIGHUP, and the report path's 2 MB cap and single parse.
import t, { type Test } from 'tap';
import { mkdtemp, rm, copyFile, readFile, writeFile } from 'node:fs/promises';
import { X509Certificate } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { deliveryWorld } from '../helpers/delivery-world.js';
import type { TestService } from '../helpers/service.js';
import { sender, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { connect, delayedDsn, selfSigned, verpAddress, type Wire } from './mx-limits-wire.js';
import { clientKey } from '../../mta/inbound/limits.js';

interface World {
  svc: TestService;
  s: Sender;
  /** Log records of the service at debug level. */
  logs: Record<string, unknown>[];
}

async function world(t: Test, env: Record<string, string> = {}): Promise<World> {
  const logs: Record<string, unknown>[] = [];
  const log = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line));
        done();
      },
    }),
  );
  const { svc } = await deliveryWorld(t, { env, log });
  return { svc, s: await sender(svc), logs };
}

/** A connection that has said EHLO; closed at the end of the test. */
async function session(t: Test, w: World, localAddress?: string): Promise<{ wire: Wire; ehlo: string[] }> {
  const { wire, greeting } = await connect(w.svc.running.ports.smtp!, localAddress);
  t.teardown(() => wire.close());
  if (greeting.code !== 220) throw new Error(`greeting ${greeting.text}`);
  const ehlo = await wire.command('EHLO client.test');
  return { wire, ehlo: ehlo.lines };
}

const events = async (w: World, returnPath: string) =>
  w.svc.running.storage.db.query<{ type: string }>(
    `SELECT e.type FROM message_events e JOIN messages m ON m.id = e.message_id
     WHERE m.return_path = $1 AND e.type IN ('bounced', 'deferred', 'complained') ORDER BY e.seq`,
    [returnPath],
  );

/** A failed DSN (RFC 3464) about several recipients, one per-recipient block each. */
function failedDsn(to: string, recipients: string[], padding = ''): string {
  return [
    'From: MAILER-DAEMON@mx.dest.test',
    `To: ${to}`,
    'Subject: Undelivered Mail Returned to Sender',
    'MIME-Version: 1.0',
    'Content-Type: multipart/report; report-type=delivery-status; boundary="B1"',
    '',
    '--B1',
    'Content-Type: text/plain',
    '',
    'Your message could not be delivered.',
    padding,
    '--B1',
    'Content-Type: message/delivery-status',
    '',
    'Reporting-MTA: dns; mx.dest.test',
    ...recipients.flatMap((r) => [
      '',
      `Final-Recipient: rfc822; ${r}`,
      'Action: failed',
      'Status: 5.1.1',
      'Diagnostic-Code: smtp; 550 5.1.1 User unknown',
    ]),
    '',
    '--B1--',
    '',
  ].join('\r\n');
}

/** DATA with dot-stuffing (RFC 5321 §4.5.2) and the final dot; resolves with the reply to it. */
async function data(wire: Wire, body: string) {
  const r = await wire.command('DATA');
  if (r.code !== 354) return r;
  wire.write(body.replace(/\r\n\./g, '\r\n..') + (body.endsWith('\r\n') ? '' : '\r\n') + '.\r\n');
  return wire.reply(30_000);
}

t.test('defaults: SIZE 26214400, no STARTTLS without a certificate, the recipient cap, reports', async (t) => {
  const w = await world(t);

  await t.test('EHLO advertises SIZE = SVC_MAX_MESSAGE_BYTES and no STARTTLS', async (t) => {
    const { wire, ehlo } = await session(t, w);
    t.ok(ehlo.includes('SIZE 26214400'), `SIZE 26214400 in ${JSON.stringify(ehlo)}`);
    t.notOk(
      ehlo.some((l) => /^STARTTLS/i.test(l)),
      'STARTTLS is not offered',
    );
    const r = await wire.command('STARTTLS');
    t.ok(r.code >= 500, `STARTTLS is refused (${r.text}), not served with a built-in certificate`);
  });

  await t.test('the 101st recipient of a transaction is answered 452 4.5.3', async (t) => {
    const verps: string[] = [];
    for (let i = 0; i < 101; i += 10) {
      const n = Math.min(10, 101 - i);
      verps.push(
        ...(await Promise.all(Array.from({ length: n }, (_, k) => verpAddress(w.svc, w.s, `r${i + k}@dest.test`)))),
      );
    }
    const { wire } = await session(t, w);
    t.equal((await wire.command('MAIL FROM:<>')).code, 250);
    for (const v of verps.slice(0, 100)) {
      const r = await wire.command(`RCPT TO:<${v}>`);
      if (r.code !== 250) t.fail(`RCPT ${v}: ${r.text}`);
    }
    const over = await wire.command(`RCPT TO:<${verps[100]}>`);
    t.equal(over.code, 452, 'RFC 5321 §4.5.3.1.10: 452, the client sends the rest later');
    t.match(over.text, /^452 4\.5\.3 /, 'with the enhanced code 4.5.3 (RFC 3463 §3.6)');
    t.equal((await wire.command(`RCPT TO:<${verps[7]}>`)).code, 250, 'a recipient given again is not one more');
    t.equal((await wire.command('RSET')).code, 250);
    t.equal((await wire.command('MAIL FROM:<>')).code, 250);
    t.equal((await wire.command(`RCPT TO:<${verps[100]}>`)).code, 250, 'the cap is per transaction');
  });

  await t.test('a 3 MB report is refused with 552 5.3.4 and records nothing', async (t) => {
    const verp = await verpAddress(w.svc, w.s, 'big@dest.test');
    const { wire } = await session(t, w);
    await wire.command('MAIL FROM:<>');
    t.equal((await wire.command(`RCPT TO:<${verp}>`)).code, 250);
    const padding = `${'x'.repeat(998)}\r\n`.repeat(3 * 1024);
    const r = await data(wire, failedDsn(verp, ['big@dest.test'], padding));
    t.equal(r.code, 552, r.text);
    t.match(r.text, /^552 5\.3\.4 Report too big \(at most 2097152 bytes\)/);
    t.same(await events(w, verp), [], 'nothing recorded');
    t.equal((await wire.command('NOOP')).code, 250, 'the session goes on');
  });

  await t.test('a report about two of our messages is parsed once and applied to each', async (t) => {
    const a = await verpAddress(w.svc, w.s, 'a@dest.test');
    const b = await verpAddress(w.svc, w.s, 'b@dest.test');
    const { wire } = await session(t, w);
    await wire.command('MAIL FROM:<>');
    t.equal((await wire.command(`RCPT TO:<${a}>`)).code, 250);
    t.equal((await wire.command(`RCPT TO:<${b}>`)).code, 250);
    const parsedBefore = w.logs.filter((l) => l.msg === 'report parsed').length;
    const r = await data(wire, failedDsn(a, ['a@dest.test', 'b@dest.test']));
    t.equal(r.code, 250, r.text);
    t.same(await events(w, a), [{ type: 'bounced' }], 'the first message bounced');
    t.same(await events(w, b), [{ type: 'bounced' }], 'the second message bounced');
    const parsed = w.logs.filter((l) => l.msg === 'report parsed').slice(parsedBefore);
    t.equal(parsed.length, 1, 'one parse for both recipients');
    t.equal(parsed[0]?.recipients, 2);
  });
});

t.test('SVC_MAX_MESSAGE_BYTES is advertised and enforced', async (t) => {
  const w = await world(t, { SVC_MAX_MESSAGE_BYTES: '100000' });
  const verp = await verpAddress(w.svc, w.s);
  const { wire, ehlo } = await session(t, w);
  t.ok(ehlo.includes('SIZE 100000'), `SIZE 100000 in ${JSON.stringify(ehlo)}`);
  t.equal(
    (await wire.command('MAIL FROM:<> SIZE=100001')).code,
    552,
    'RFC 1870 §6.2: a declared size over it, at MAIL',
  );
  t.equal((await wire.command('MAIL FROM:<> SIZE=5000')).code, 250);
  t.equal((await wire.command(`RCPT TO:<${verp}>`)).code, 250);
  const r = await data(
    wire,
    delayedDsn(verp, 'rcpt@dest.test', 'mx.dest.test') + 'y'.repeat(76).concat('\r\n').repeat(2000),
  );
  t.equal(r.code, 552, 'an undeclared size over it, after the data');
  t.match(r.text, /^552 5\.3\.4 Message too big \(at most 100000 bytes\)/);
  t.same(await events(w, verp), [], 'nothing recorded');
  t.equal((await wire.command('QUIT')).code, 221);
});

t.test('connections are counted per IPv4 address and per IPv6 /64', async (t) => {
  t.equal(clientKey('192.0.2.1'), '192.0.2.1');
  t.equal(clientKey('::ffff:192.0.2.1'), '192.0.2.1', 'an IPv4-mapped address is its IPv4 address');
  t.equal(clientKey('2001:db8:1:2:3:4:5:6'), '2001:db8:1:2::/64');
  t.equal(clientKey('2001:DB8:1:2::ffff'), '2001:db8:1:2::/64', 'case and compression do not matter');
  t.equal(clientKey('2001:db8::1'), '2001:db8:0:0::/64');
  t.equal(clientKey('2001:0db8:0001:0002:0:0:0:1'), '2001:db8:1:2::/64', 'leading zeros do not matter');
  t.equal(clientKey('1:2::4:5:6:1.2.3.4'), '1:2:0:4::/64', 'an embedded IPv4 tail is two groups');
});

t.test('connections: overall and per client address', async (t) => {
  const w = await world(t, { SVC_MX_MAX_CONNECTIONS: '4', SVC_MX_MAX_CONNECTIONS_PER_IP: '2' });
  const port = w.svc.running.ports.smtp!;
  const open = async (from: string) => {
    const c = await connect(port, from);
    t.teardown(() => c.wire.close());
    return c;
  };
  const a1 = await open('127.0.0.1');
  const a2 = await open('127.0.0.1');
  t.equal(a1.greeting.code, 220);
  t.equal(a2.greeting.code, 220);
  const a3 = await open('127.0.0.1');
  t.equal(a3.greeting.code, 421, 'the third from one address is refused');
  t.match(a3.greeting.text, /^421 4\.7\.0 /);
  await a3.wire.closed;
  t.pass('and closed');
  const b1 = await open('127.0.0.2');
  t.equal(b1.greeting.code, 220, 'another address still connects');
  const b2 = await open('127.0.0.2');
  t.equal(b2.greeting.code, 220);
  const c1 = await open('127.0.0.3');
  t.equal(c1.greeting.code, 421, 'the fifth connection overall is refused');
  t.match(c1.greeting.text, /Too many connected clients/);
  await c1.wire.closed;

  t.equal((await a1.wire.command('QUIT')).code, 221);
  await a1.wire.closed;
  // The closed session's place is free again, for its address and overall.
  const again = await waitFor(
    async () => {
      const c = await open('127.0.0.1');
      if (c.greeting.code === 220) return c;
      c.wire.close();
      return null;
    },
    { what: 'a new connection from 127.0.0.1 greeted' },
  );
  t.equal((await again.wire.command('EHLO client.test')).code, 250);
});

t.test('the idle timeout and the session deadline', async (t) => {
  await t.test('a silent client is closed after SVC_MX_IDLE_TIMEOUT', async (t) => {
    const w = await world(t, { SVC_MX_IDLE_TIMEOUT: '300ms' });
    const { wire } = await session(t, w);
    const r = await wire.reply();
    t.equal(r.code, 421, r.text);
    await wire.closed;
  });

  await t.test('a busy session is closed with 421 4.4.2 at SVC_MX_SESSION_TIMEOUT', async (t) => {
    const w = await world(t, { SVC_MX_SESSION_TIMEOUT: '1s' });
    const started = Date.now();
    const { wire } = await session(t, w);
    let noops = 0;
    let r = await wire.command('NOOP');
    // Activity does not extend the deadline (the idle timeout is what any byte resets).
    while (r.code === 250 && Date.now() - started < 10_000) {
      noops++;
      r = await wire.command('NOOP');
    }
    t.equal(r.code, 421, r.text);
    t.match(r.text, /^421 4\.4\.2 /);
    t.ok(noops > 10, `the client kept talking (${noops} NOOPs)`);
    const took = Date.now() - started;
    t.ok(took >= 1000 && took < 5000, `closed after the deadline (${took} ms)`);
    await wire.closed;
  });
});

t.test('STARTTLS with SVC_TLS_CERT/SVC_TLS_KEY, and SIGHUP swaps the certificate', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-tls-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const first = await selfSigned(dir, 'first', 'mx.test');
  const second = await selfSigned(dir, 'second', 'mx2.test');
  const live = { cert: path.join(dir, 'live.crt'), key: path.join(dir, 'live.key') };
  await copyFile(first.cert, live.cert);
  await copyFile(first.key, live.key);
  const fingerprint = async (file: string) => new X509Certificate(await readFile(file)).fingerprint256;
  const w = await world(t, { SVC_TLS_CERT: live.cert, SVC_TLS_KEY: live.key });

  /** The fingerprint the listener presents to a new connection after STARTTLS. */
  const presented = async (servername?: string) => {
    const { wire, ehlo } = await session(t, w);
    t.ok(ehlo.includes('STARTTLS'), 'STARTTLS offered');
    const secure = await wire.starttls(servername);
    const after = await wire.command('EHLO client.test');
    t.notOk(after.lines.includes('STARTTLS'), 'not offered again inside TLS (RFC 3207 §4.2)');
    t.equal((await wire.command('MAIL FROM:<>')).code, 250, 'a transaction goes on over TLS');
    const fp = secure.getPeerCertificate().fingerprint256;
    wire.close();
    return fp;
  };

  t.equal(await presented(), await fingerprint(first.cert), 'the configured certificate, without SNI');
  t.equal(await presented('mx.test'), await fingerprint(first.cert), 'and with SNI');

  await copyFile(second.cert, live.cert);
  await copyFile(second.key, live.key);
  process.kill(process.pid, 'SIGHUP');
  const want = await fingerprint(second.cert);
  await waitFor(async () => (await presented()) === want, { what: 'the new certificate after SIGHUP' });
  t.equal(await presented('mx.test'), want, 'with SNI too');

  await writeFile(live.cert, 'not a certificate');
  t.equal(await w.svc.running.reloadTls(), null, 'a reload of a bad file fails');
  t.ok(
    w.logs.some((l) => l.msg === 'TLS certificate reload failed; the certificate in use is kept'),
    'and is logged',
  );
  t.equal(await presented(), want, 'the certificate in use is kept');
});
