// Issue 6 item 4 (docs/decisions.md #10): asynchronous reports sent over SMTP, with swaks, to the MX
// listener at the VERP return path of a delivered message. Fixtures follow the RFCs' examples
// (RFC 3464 Appendix, RFC 5965 §B.1) and common MTA formats (Postfix, Exim, qmail).
import t, { type Test } from 'tap';
import { execFile } from 'node:child_process';
import { deliveryWorld } from '../helpers/delivery-world.js';
import type { TestService } from '../helpers/service.js';
import type { SmtpSink } from '../helpers/smtp-sink.js';
import { sender, sentAs, type Sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';

interface World {
  svc: TestService;
  sink: SmtpSink;
  s: Sender;
}

async function world(t: Test): Promise<World> {
  const { sink, svc } = await deliveryWorld(t, { env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' } });
  return { svc, sink, s: await sender(svc) };
}

/** Sends one message and waits for its delivery: returns its id and the VERP return path the sink saw. */
async function delivered(w: World, to: string): Promise<{ id: string; verp: string; messageIdHeader: string }> {
  const { providerMessageId: id } = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to,
    subject: 'Your receipt',
    text: 'Thanks',
  });
  const sent = await sentAs(w.svc, id);
  const m = await waitFor(() => w.sink.messages.find((x) => x.mailFrom === sent.returnPath), {
    what: `${id} at the sink`,
  });
  await waitFor(async () => (await status(w, id)) === 'delivered', { what: `${id} delivered` });
  return { id, verp: m.mailFrom, messageIdHeader: sent.messageIdHeader };
}

const status = async (w: World, id: string) =>
  (await w.svc.running.storage.db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [id]))[0]
    ?.status;
const events = async (w: World, id: string) =>
  w.svc.running.storage.db.query<{ type: string; detail: Record<string, unknown> }>(
    'SELECT type, detail FROM message_events WHERE message_id = $1 ORDER BY seq',
    [id],
  );
const suppression = async (w: World, address: string) =>
  (
    await w.svc.running.storage.db.query<{ reason: string }>(
      'SELECT reason FROM suppressions WHERE project_id = $1 AND address = $2',
      [w.s.projectId, address],
    )
  )[0]?.reason;

/** swaks, a real SMTP client: null sender (RFC 5321 §4.5.5), the report as DATA. */
function swaks(w: World, to: string, data: string): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      'swaks',
      [
        '--server',
        `127.0.0.1:${w.svc.running.ports.smtp}`,
        '--from',
        '<>',
        '--to',
        to,
        '--data',
        '-',
        '--timeout',
        '20',
      ],
      (err, stdout, stderr) =>
        resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
    child.stdin!.end(data.replace(/\r?\n/g, '\r\n'));
  });
}

const originalHeaders = (h: { messageIdHeader: string }, to: string) =>
  `From: ada@example\nTo: ${to}\nSubject: Your receipt\nMessage-ID: ${h.messageIdHeader}\n`;

t.test('DSN failed (Postfix format): bounced, hard_bounce suppression, the diagnostic kept', async (t) => {
  const w = await world(t);
  const m = await delivered(w, 'gone@dest.test');
  const dsn = `From: MAILER-DAEMON@mx.dest.test (Mail Delivery System)
To: ${m.verp}
Subject: Undelivered Mail Returned to Sender
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary="B1"

--B1
Content-Description: Notification
Content-Type: text/plain; charset=us-ascii

I'm sorry to have to inform you that your message could not
be delivered to one or more recipients.

--B1
Content-Description: Delivery report
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.dest.test
X-Postfix-Queue-ID: 4F1D2A3B
Arrival-Date: Sat, 21 Nov 2026 10:00:00 +0000

Final-Recipient: rfc822; gone@dest.test
Original-Recipient: rfc822;gone@dest.test
Action: failed
Status: 5.1.1
Remote-MTA: dns; inner.dest.test
Diagnostic-Code: smtp; 550 5.1.1 <gone@dest.test>: Recipient address rejected:
    User unknown in local recipient table

--B1
Content-Description: Undelivered Message Headers
Content-Type: text/rfc822-headers

${originalHeaders(m, 'gone@dest.test')}
--B1--
`;
  const r = await swaks(w, m.verp, dsn);
  t.equal(r.code, 0, 'the report is taken');
  t.match(r.out, /<- +250 /, 'answered 250');
  t.equal(await status(w, m.id), 'bounced');
  const ev = (await events(w, m.id)).at(-1)!;
  t.equal(ev.type, 'bounced');
  // The same report again (a retransmission, a copy): taken, and counted once (docs/decisions.md #53).
  t.equal((await swaks(w, m.verp, dsn)).code, 0, 'a second copy is taken too');
  t.equal((await events(w, m.id)).filter((e) => e.type === 'bounced').length, 1, 'one bounced event, not two');
  t.match(ev.detail, {
    source: 'dsn',
    action: 'failed',
    status: '5.1.1',
    class: 'unknown_user',
    reportingMta: 'mx.dest.test',
    diagnostic: /550 5\.1\.1 <gone@dest\.test>: Recipient address rejected: User unknown/,
  });
  t.equal(await suppression(w, 'gone@dest.test'), 'hard_bounce');
});

t.test('DSN delayed (RFC 3464 example): a deferral recorded, the status kept', async (t) => {
  const w = await world(t);
  const m = await delivered(w, 'slow@dest.test');
  const dsn = `From: postmaster@mx.dest.test
To: ${m.verp}
Subject: Delivery delayed
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status;
    boundary="RAA14128.773615765/CS.UTK.EDU"

--RAA14128.773615765/CS.UTK.EDU

Your message has not been delivered yet. Delivery will be retried.

--RAA14128.773615765/CS.UTK.EDU
content-type: message/delivery-status

Reporting-MTA: dns; mx.dest.test

Original-Recipient: rfc822;slow@dest.test
Final-Recipient: RFC822; slow@dest.test
Action: delayed
Status: 4.4.1
Will-Retry-Until: Sun, 22 Nov 2026 10:00:00 +0000

--RAA14128.773615765/CS.UTK.EDU--
`;
  t.equal((await swaks(w, m.verp, dsn)).code, 0);
  t.equal(await status(w, m.id), 'delivered');
  t.match((await events(w, m.id)).at(-1), {
    type: 'deferred',
    detail: { source: 'dsn', action: 'delayed', status: '4.4.1' },
  });
  t.equal(await suppression(w, 'slow@dest.test'), undefined);
});

t.test('ARF abuse report (RFC 5965 §B.1): complained, complaint suppression', async (t) => {
  const w = await world(t);
  const m = await delivered(w, 'annoyed@dest.test');
  const arf = `From: <abusedesk@dest.test>
Date: Sat, 21 Nov 2026 10:00:00 +0000
Subject: FW: Your receipt
To: <${m.verp}>
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report;
     boundary="part1_13d.2e68ed54_boundary"

--part1_13d.2e68ed54_boundary
Content-Type: text/plain; charset="US-ASCII"
Content-Transfer-Encoding: 7bit

This is an email abuse report for an email message received from IP
192.0.2.1 on Sat, 21 Nov 2026 09:00:00 +0000.

--part1_13d.2e68ed54_boundary
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: SomeGenerator/1.0
Version: 1
Original-Mail-From: <${m.verp}>
Original-Rcpt-To: <annoyed@dest.test>
Arrival-Date: Sat, 21 Nov 2026 09:00:00 +0000
Reporting-MTA: dns; mail.dest.test
Source-IP: 192.0.2.1

--part1_13d.2e68ed54_boundary
Content-Type: message/rfc822
Content-Disposition: inline

${originalHeaders(m, 'annoyed@dest.test')}
Thanks
--part1_13d.2e68ed54_boundary--
`;
  // Subscribed only to complaints: the ARF below is what fires it (the attempt itself is the webhooks tests' job).
  await w.s.owner.client.console.projects.webhooks.create({
    id: w.s.projectId,
    url: 'http://127.0.0.1:9/hook',
    events: ['complained'],
  });
  t.equal((await swaks(w, m.verp, arf)).code, 0);
  t.equal(await status(w, m.id), 'delivered', 'a complaint does not undo the delivery');
  const hooks = await w.svc.running.storage.db.query<{ event_type: string }>(
    'SELECT event_type FROM webhook_deliveries WHERE project_id = $1 AND attempt = 1',
    [w.s.projectId],
  );
  t.same(
    hooks.map((h) => h.event_type),
    ['complained'],
    'the complaint fans out to the webhook, in the same transaction',
  );
  t.match((await events(w, m.id)).at(-1), {
    type: 'complained',
    detail: { source: 'arf', feedbackType: 'abuse', userAgent: 'SomeGenerator/1.0' },
  });
  t.equal(await suppression(w, 'annoyed@dest.test'), 'complaint');
  t.equal((await swaks(w, m.verp, arf)).code, 0, 'the same complaint again is taken');
  t.equal((await events(w, m.id)).filter((e) => e.type === 'complained').length, 1, 'and counted once');
  // First attempts only: the endpoint refuses, so the first one may already have a retry of its own.
  const hooksAfter = await w.svc.running.storage.db.query(
    'SELECT 1 FROM webhook_deliveries WHERE project_id = $1 AND attempt = 1',
    [w.s.projectId],
  );
  t.equal(hooksAfter.length, 1, 'no second webhook');
  const again = await w.s.key.v1.services.sendEmail({
    from: `ada@${w.s.domain}`,
    to: 'annoyed@dest.test',
    subject: 'x',
    text: 'x',
  });
  t.equal(again.status, 'suppressed');
});

t.test('plain-text bounces (Exim, qmail) are read by their patterns; a not-spam report is ignored', async (t) => {
  const w = await world(t);
  const exim = await delivered(w, 'e@dest.test');
  const eximText = `From: Mail Delivery System <Mailer-Daemon@mx.dest.test>
To: ${exim.verp}
Subject: Mail delivery failed: returning message to sender

This message was created automatically by mail delivery software.

A message that you sent could not be delivered to one or more of its
recipients. This is a permanent error. The following address(es) failed:

  e@dest.test
    host mx.dest.test [192.0.2.7]
    SMTP error from remote mail server after RCPT TO:<e@dest.test>:
    550 5.1.1 <e@dest.test>: Recipient address rejected: User unknown
`;
  t.equal((await swaks(w, exim.verp, eximText)).code, 0);
  t.equal(await status(w, exim.id), 'bounced');
  t.match((await events(w, exim.id)).at(-1), {
    type: 'bounced',
    detail: { source: 'text', class: 'unknown_user', reply: /^550 5\.1\.1/ },
  });

  const qmail = await delivered(w, 'q@dest.test');
  const qmailText = `From: MAILER-DAEMON@mx.dest.test
To: ${qmail.verp}
Subject: failure notice

Hi. This is the qmail-send program at mx.dest.test.
I'm afraid I wasn't able to deliver your message to the following addresses.
This is a permanent error; I've given up. Sorry it didn't work out.

<q@dest.test>:
Sorry, no mailbox here by that name. (#5.1.1)
`;
  t.equal((await swaks(w, qmail.verp, qmailText)).code, 0);
  t.equal(await status(w, qmail.id), 'bounced');
  t.equal(await suppression(w, 'q@dest.test'), 'hard_bounce');

  const fine = await delivered(w, 'fine@dest.test');
  const notSpam = `From: fbl@dest.test
To: ${fine.verp}
Subject: report
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary="X"

--X
Content-Type: message/feedback-report

Feedback-Type: not-spam
User-Agent: x/1
Version: 1

--X--
`;
  t.equal((await swaks(w, fine.verp, notSpam)).code, 0, 'accepted');
  t.same(
    (await events(w, fine.id)).map((e) => e.type),
    ['queued', 'delivered'],
    'and changes nothing',
  );
});

t.test('the listener refuses every address that is not the return path of a message we sent', async (t) => {
  const w = await world(t);
  const m = await delivered(w, 'x@dest.test');
  const body = 'Subject: hi\n\nhello\n';
  // A return path we did not send is an unknown mailbox (5.1.1); any other address at a domain without a
  // verified inbound capability is relaying, refused with 5.7.1 (mta/inbound/recipients.ts).
  for (const [to, reply] of [
    ['someone@dest.test', /550 5\.7\.1/],
    [`b-${'0'.repeat(32)}@bounces.${w.s.domain}`, /550 5\.1\.1/],
    // The id guessed (say from headers): without the tag, and with a made-up one (docs/decisions.md #53).
    [`b-${m.id.replace(/-/g, '')}@bounces.${w.s.domain}`, /550 5\.1\.1/],
    [`b-${m.id.replace(/-/g, '')}-${'0'.repeat(12)}@bounces.${w.s.domain}`, /550 5\.1\.1/],
    [m.verp.replace(/@.*/, '@bounces.elsewhere.test'), /550 5\.1\.1/],
    [m.verp.replace('b-', 'c-'), /550 5\.7\.1/],
  ] as const) {
    const r = await swaks(w, to, body);
    t.not(r.code, 0, `refused: ${to}`);
    t.match(r.out, reply);
  }
  t.same(
    (await events(w, m.id)).map((e) => e.type),
    ['queued', 'delivered'],
  );
});
