// RFC 3501 §5.4 and RFC 2177 §3: the autologout timer. The service runs with a 300 ms timer (the option
// tests set; the default is AUTOLOGOUT_MS, 30 minutes, the RFC's floor): a silent client is told BYE and
// closed, before and after login and while in IDLE; every command the client sends starts the timer again.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { makeInbox, rawImap, rawSession } from '../helpers/imap-inbox.js';
import { waitFor } from '../helpers/wait-for.js';
import { AUTOLOGOUT_MS } from '../../imap/limits.js';

const TIMER_MS = 300;
const svc = await startTestService(t, { imap: { autologoutMs: TIMER_MS } });
const a = await makeInbox(svc.running.storage);

t.equal(AUTOLOGOUT_MS, 30 * 60 * 1000, 'the default is the 30 minutes RFC 3501 §5.4 requires at least');

async function closedWithBye(raw: Awaited<ReturnType<typeof rawImap>>, what: string) {
  const started = Date.now();
  await waitFor(() => (raw.closed() ? true : null), { what, timeoutMs: 5000 });
  t.match(raw.text(), /\* BYE autologout[^\r]*\r\n$/, `${what}: BYE, then the connection ends`);
  return Date.now() - started;
}

t.test('a client that says nothing is logged out, before and after login', async (t) => {
  const pre = await rawImap(svc.imapPort);
  await pre.until(/^\* OK/);
  await closedWithBye(pre, 'not authenticated');
  const post = await rawImap(svc.imapPort);
  await post.until(/^\* OK/);
  post.send(`l LOGIN ${a.address} ${a.password}`);
  await post.until(/l OK/);
  await closedWithBye(post, 'authenticated');
  t.pass();
});

t.test('every command starts the timer again', async (t) => {
  const raw = await rawImap(svc.imapPort);
  await raw.until(/^\* OK/);
  // Five NOOPs, each within the timer of the one before, span well over one timer: the session lives.
  for (let i = 0; i < 5; i++) {
    raw.send(`n${i} NOOP`);
    await raw.until(new RegExp(`n${i} OK`));
    await new Promise((r) => setTimeout(r, TIMER_MS / 2));
  }
  t.notOk(raw.closed(), `alive after ${(5 * TIMER_MS) / 2} ms of commands`);
  t.notMatch(raw.text(), /BYE/);
  await closedWithBye(raw, 'then silent');
});

t.test('IDLE does not keep a session forever (RFC 2177 §3: clients re-issue it)', async (t) => {
  const raw = await rawSession(svc.imapPort, a, { select: 'INBOX', idle: true });
  await closedWithBye(raw, 'idling');
  t.pass();
});
