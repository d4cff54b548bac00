// IDLE woken by mail that another process received: the MX listener runs as `svc start --role mta` in a
// child process, the IMAP server in this one, both on one Postgres database; the child's commit reaches
// the idling session through the change feed's LISTEN/NOTIFY (storage/pg/change-feed.ts). Postgres CI pass
// only: the embedded database lives inside one process.
import t from 'tap';
import { sharedWith, startTestService } from '../helpers/service.js';
import { makeInbox, rawSession } from '../helpers/imap-inbox.js';
import { listenEnv, svc as svcChild } from '../helpers/child.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { sendOnce } from '../helpers/smtp-client.js';
import { waitFor } from '../helpers/wait-for.js';

t.test(
  'an SMTP delivery handled by another process wakes IDLE with EXISTS',
  { skip: process.env.SVC_DATABASE_URL ? false : 'PGlite lives in one process: no second process can share it' },
  async (t) => {
    const imap = await startTestService(t);
    const a = await makeInbox(imap.running.storage);
    // The child authenticates what it receives (SPF, DKIM, DMARC): a zone that answers at once, empty.
    const zone = await startDnsZone(t);
    const mx = svcChild(t, ['start', '--role', 'mta'], {
      // One host, one SVC_DATA_DIR (as the systemd units share their env file): the local blob store is
      // LMDB, which both processes open; across hosts SVC_BLOB_STORE=postgres does the same.
      ...listenEnv(imap.dataDir),
      ...(await sharedWith(imap)),
      SVC_DNS_SERVERS: zone.hostPort,
    });
    const line = await waitFor(
      () => {
        if (mx.exit)
          throw new Error(`the mta child exited ${JSON.stringify(mx.exit)}:\n${mx.stdout()}\n${mx.stderr()}`);
        return mx.logs().find((l) => l.msg === 'MX listener accepting');
      },
      { timeoutMs: 60_000, what: "the child's 'MX listener accepting'" },
    );
    const smtpPort = Number(line.smtp);

    const raw = await rawSession(imap.imapPort, a, { select: 'INBOX', idle: true });
    const message = Buffer.from(
      [`From: far@sender.test`, `To: ${a.address}`, 'Subject: across processes', '', 'hello', ''].join('\r\n'),
    );
    const info = await sendOnce(smtpPort, 'far@sender.test', [a.address], message);
    t.match(info.response, /^250/, 'the other process accepted it');
    await raw.until(/\* 1 EXISTS\r\n/, 'EXISTS while idling, from the other process');
    raw.send('DONE');
    await raw.until(/i OK/);
    raw.send('f FETCH 1 (BODY.PEEK[HEADER.FIELDS (SUBJECT)])');
    await raw.until(/Subject: across processes[^]*f OK/);
    t.pass('the delivered message is readable at once');
    raw.close();
  },
);
