// Issue 12 item 12: Debian's Postfix, as a sending organization's outbound MTA, relays into our MX
// listener: the message lands in the inbox with Postfix's trace and ours; a recipient we refuse at RCPT
// (550 5.1.1) is refused to Postfix, which then bounces it rather than retrying.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { addInbox, inboundDomain, readMailbox } from '../helpers/inbox.js';
import { sendOnce } from '../helpers/smtp-client.js';
import { startPostfixRelay } from '../helpers/postfix-relay.js';
import { waitFor } from '../helpers/wait-for.js';

t.test('Postfix relays into the inbox; an unknown localpart is refused to it with 550 5.1.1', async (t) => {
  const svc = await startTestService(t, { mta: true });
  const { storage } = svc.running;
  const d = await inboundDomain(svc, storage);
  const box = await addInbox(storage, d, 'sales');
  const relay = await startPostfixRelay(t, { to: svc.running.ports.smtp! });

  const message = Buffer.from(
    [
      'From: Ada <ada@sender.test>',
      `To: ${box.address}`,
      'Subject: Through Postfix',
      'Message-ID: <via-postfix@sender.test>',
      '',
      'Relayed.',
      '',
    ].join('\r\n'),
  );
  const info = await sendOnce(relay.port, 'ada@sender.test', [box.address, `nobody@${d.domain}`], message);
  t.same(info.accepted.length, 2, 'Postfix queues both (it checks nothing of ours at submission)');

  const [m] = await waitFor(
    async () => {
      const list = await readMailbox(storage, box.mailboxes.INBOX!.id);
      return list.length ? list : null;
    },
    { timeoutMs: 30_000, what: `the relayed message in ${box.address}` },
  ).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await relay.log()}`);
  });
  t.equal(m!.messageId, 'via-postfix@sender.test');
  const full = m!.full.toString('latin1');
  t.match(full, /^Return-Path: <ada@sender\.test>\r\n/, 'our Return-Path first');
  t.match(full, /Received: from relay\.sender\.test \(\[127\.0\.0\.1\]\)\r\n\tby mta\.test \(svc-mail\) with ESMTP/);
  t.match(full, new RegExp(`\tfor <${box.address}>;`));
  t.match(
    m!.body.toString('latin1'),
    /^Received: from client\.test \(unknown \[127\.0\.0\.1\]\)\r\n\tby relay\.sender\.test \(Postfix\)/,
    "Postfix's own trace kept",
  );
  t.match(m!.body.toString('latin1'), /\r\n\r\nRelayed\.\r\n$/, 'the body');

  const log = await waitFor(
    async () => {
      const l = await relay.log();
      return /nobody@.*said: 550 5\.1\.1/.test(l) && l;
    },
    { timeoutMs: 30_000, what: 'Postfix to log our 550 5.1.1' },
  );
  t.match(log, /status=bounced/, 'Postfix bounces the refused recipient instead of retrying');
});
