// Issue 12 item 12: the VERP reports keep working on the same listener, also in one transaction with an
// inbox recipient: a DSN sent both to the return path of a message we sent and to an inbox bounces the
// message and lands in the inbox, before the one 250.
import t from 'tap';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sentAs } from '../helpers/sender.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { addInbox, inboundDomain, readMailbox } from '../helpers/inbox.js';
import { swaks } from '../helpers/smtp-client.js';

t.test('one DSN to a VERP return path and an inbox: the bounce recorded and the message stored', async (t) => {
  const { sink, svc } = await deliveryWorld(t);
  const { storage } = svc.running;
  const s = await sender(svc);
  const { providerMessageId: id } = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'gone@dest.test',
    subject: 'Your receipt',
    text: 'Thanks',
  });
  const { returnPath, messageIdHeader } = await sentAs(svc, id);
  const sent = await waitFor(() => sink.messages.find((x) => x.mailFrom === returnPath), { what: `${id} at the sink` });
  const status = async () =>
    (await storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]?.status;
  await waitFor(async () => (await status()) === 'delivered', { what: `${id} delivered` });

  const d = await inboundDomain(svc, storage);
  const box = await addInbox(storage, d, 'postmaster');
  const dsn = `From: MAILER-DAEMON@mx.dest.test
To: ${sent.mailFrom}
Subject: Undelivered Mail Returned to Sender
Message-ID: <dsn-1@mx.dest.test>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="B1"

--B1
Content-Type: text/plain

Your message could not be delivered.

--B1
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.dest.test

Final-Recipient: rfc822; gone@dest.test
Action: failed
Status: 5.1.1
Diagnostic-Code: smtp; 550 5.1.1 no such user

--B1
Content-Type: text/rfc822-headers

From: ada@${s.domain}
To: gone@dest.test
Subject: Your receipt
Message-ID: ${messageIdHeader}

--B1--
`;
  const r = await swaks(svc.running.ports.smtp!, { from: '<>', to: `${sent.mailFrom},${box.address}`, data: dsn });
  t.equal(r.code, 0, `both recipients and the DSN accepted\n${r.out}`);
  t.equal(await status(), 'bounced', 'the report took effect');
  const [m] = await readMailbox(storage, box.mailboxes.INBOX!.id);
  t.equal(m?.messageId, 'dsn-1@mx.dest.test', 'and the inbox has the DSN');
  t.match(m!.prefix.toString('latin1'), /^Return-Path: <>\r\n/, 'null sender recorded as <>');
});
