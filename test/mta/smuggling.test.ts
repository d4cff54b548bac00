// Issue 12 item 15: bare CR or LF never end a message (RFC 5321 §2.3.8, §4.1.1.4), so no sequence in
// the SMTP smuggling family (CVE-2023-51764 and its siblings) splits one DATA into two messages.
// smtp-server 3.21.6 ends DATA only at <CRLF>.<CRLF> (or ".<CRLF>" as the first line), checked here
// through a raw socket: after each ending the bytes of a second transaction follow in the same write;
// the listener must answer it as one message (one 250, no replies to the smuggled commands) and
// record one report, not two.
import t, { type Test } from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import type { TestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { connect, delayedDsn, verpAddress } from './mx-limits-wire.js';

interface World {
  svc: TestService;
  verp: string;
  messageId: string;
}

async function world(t: Test): Promise<World> {
  const { svc } = await deliveryWorld(t);
  const verp = await verpAddress(svc, await sender(svc));
  const rows = await svc.running.storage.db.query<{ id: string }>('SELECT id FROM messages WHERE return_path = $1', [
    verp,
  ]);
  return { svc, verp, messageId: rows[0]!.id };
}

const deferredEvents = async (w: World) =>
  (
    await w.svc.running.storage.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM message_events WHERE message_id = $1 AND type = 'deferred'`,
      [w.messageId],
    )
  )[0]!.n;

// Each ending is written where a lax server would see the end of the data. <LF>.<LF> and friends are
// the sequences of the 2023 SMTP smuggling research (SEC Consult); the NUL one fooled some parsers too.
const endings: [string, string][] = [
  ['<LF>.<LF>', '\n.\n'],
  ['<LF>.<CR><LF>', '\n.\r\n'],
  ['<CR>.<LF>', '\r.\n'],
  ['<CR>.<CR><LF>', '\r.\r\n'],
  ['<CR><LF>.<LF>', '\r\n.\n'],
  ['<CR><LF>.<CR>', '\r\n.\r'],
  ['<CR>.<CR>', '\r.\r'],
  ['<CR><LF><NUL>.<CR><LF>', '\r\n\0.\r\n'],
  ['a bare <LF>', '\n'],
  ['a bare <CR>', '\r'],
];

t.test('no smuggling ending splits a message: one reply, one report', async (t) => {
  const w = await world(t);
  const port = w.svc.running.ports.smtp!;
  for (const [name, ending] of endings) {
    await t.test(name, async (t) => {
      const before = await deferredEvents(w);
      const { wire, greeting } = await connect(port);
      t.teardown(() => wire.close());
      t.equal(greeting.code, 220);
      t.equal((await wire.command('EHLO client.test')).code, 250);
      t.equal((await wire.command('MAIL FROM:<>')).code, 250);
      t.equal((await wire.command(`RCPT TO:<${w.verp}>`)).code, 250);
      t.equal((await wire.command('DATA')).code, 354);
      // The first report, the ending, then a whole second transaction pipelined behind it.
      const smuggled =
        `MAIL FROM:<>\r\nRCPT TO:<${w.verp}>\r\nDATA\r\n` +
        delayedDsn(w.verp, 'rcpt@dest.test', 'second.test') +
        '\r\n.\r\n';
      wire.write(delayedDsn(w.verp, 'rcpt@dest.test', 'first.test').replace(/\r\n$/, '') + ending + smuggled);
      const end = await wire.reply();
      t.equal(end.code, 250, 'the message is taken once, at the real <CRLF>.<CRLF>');
      const quit = await wire.command('QUIT');
      t.equal(quit.code, 221, 'the next reply answers QUIT: the smuggled MAIL, RCPT and DATA were never commands');
      await wire.closed;
      t.equal((await deferredEvents(w)) - before, 1, 'one report recorded, not two');
    });
  }
});

t.test('".<LF>" as the first line of the data does not end it either', async (t) => {
  const w = await world(t);
  const before = await deferredEvents(w);
  const { wire } = await connect(w.svc.running.ports.smtp!);
  t.teardown(() => wire.close());
  await wire.command('EHLO client.test');
  await wire.command('MAIL FROM:<>');
  await wire.command(`RCPT TO:<${w.verp}>`);
  t.equal((await wire.command('DATA')).code, 354);
  wire.write(
    `.\nMAIL FROM:<>\r\nRCPT TO:<${w.verp}>\r\nDATA\r\n` +
      delayedDsn(w.verp, 'rcpt@dest.test', 'second.test') +
      '\r\n.\r\n',
  );
  t.equal((await wire.reply()).code, 250, 'one 250 for the whole');
  t.equal((await wire.command('QUIT')).code, 221);
  t.equal((await deferredEvents(w)) - before, 1, 'one report');
});
