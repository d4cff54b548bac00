// Issue 12 item 13: nothing is acknowledged before it is durable. `kill -9` the service (a real `svc start`
// child) during a stream of inbound deliveries; after a restart on the same data, every message that got
// its 250 is in the inbox (by Message-ID), every stored row has its body, and used bytes is the sum of
// the stored sizes: nothing half-stored is visible. A message stored whose 250 the kill cut off may be
// there too (the client sends it again: at least once, RFC 5321 §6.1).
import t from 'tap';
import { loadConfig } from '../../config/load.js';
import { startService, type RunningService } from '../../bin/start.js';
import { clientsFor } from '../helpers/service.js';
import { exitWithin, listening, serviceEnv, svc, tempDir, type Svc } from '../helpers/child.js';
import { startDnsZone } from '../helpers/dns-zone.js';
import { addInbox, inboundDomain, inboxNow, readMailbox } from '../helpers/inbox.js';
import { sendOnce } from '../helpers/smtp-client.js';
import { waitFor } from '../helpers/wait-for.js';

const CONCURRENCY = 8;
const BEFORE_KILL = 120;

t.test('kill -9 during inbound deliveries loses no acknowledged message', async (t) => {
  const zone = await startDnsZone(t);
  const dataDir = await tempDir(t);
  const env = await serviceEnv(t, { dataDir, dns: zone.hostPort });
  // The same data, opened in this process while no child runs: to set up, and to look afterwards.
  const inProcess = async <T>(fn: (s: RunningService) => Promise<T>): Promise<T> => {
    const s = await startService(loadConfig({ ...env, SVC_LOG_LEVEL: 'silent' }), { passwordLogN: 10, mta: false });
    try {
      return await fn(s);
    } finally {
      await s.stop();
    }
  };
  const box = await inProcess(async (s) => {
    const d = await inboundDomain(
      clientsFor(() => s.publicUrl),
      s.storage,
    );
    return addInbox(s.storage, d, 'stream');
  });

  const boot = async (): Promise<{ child: Svc; smtp: number }> => {
    const child = svc(t, ['start'], env);
    await listening(child);
    const line = child.logs().find((l) => l.msg === 'MX listener accepting');
    return { child, smtp: Number(line?.smtp) };
  };
  let current = await boot();
  t.ok(current.smtp > 0, `MX listening on ${current.smtp}`);

  const acked = new Set<string>();
  let next = 0;
  let killed = false;
  let lastError: unknown = null;
  const message = (i: number) =>
    Buffer.from(
      `From: ada@sender.test\r\nTo: ${box.address}\r\nSubject: n${i}\r\nMessage-ID: <m${i}@sender.test>\r\n\r\n` +
        `${`line ${i} `.repeat(200 + (i % 50) * 40)}\r\n`,
    );
  const worker = async () => {
    while (!killed) {
      const i = next++;
      try {
        const info = await sendOnce(current.smtp, 'ada@sender.test', [box.address], message(i));
        if (info.accepted.length === 1) acked.add(`m${i}@sender.test`);
      } catch (err) {
        // Cut off by the kill: not acknowledged, so not owed. Before the kill nothing may fail.
        if (!killed) lastError = err;
        return;
      }
    }
  };
  const stream = Promise.all(Array.from({ length: CONCURRENCY }, worker));
  await waitFor(() => acked.size >= BEFORE_KILL || lastError, {
    timeoutMs: 90_000,
    what: `${BEFORE_KILL} deliveries acknowledged`,
  });
  t.equal(lastError, null, 'no delivery failed before the kill');
  current.child.child.kill('SIGKILL');
  killed = true;
  await exitWithin(current.child, 'the MX after SIGKILL');
  await stream;
  t.ok(acked.size >= BEFORE_KILL, `${acked.size} acknowledged of ${next} started before the kill`);

  current = await boot();
  const after = await sendOnce(current.smtp, 'ada@sender.test', [box.address], message(next));
  t.equal(after.accepted.length, 1, 'the restarted MX takes mail again');
  acked.add(`m${next}@sender.test`);
  current.child.child.kill('SIGTERM');
  t.equal((await exitWithin(current.child, 'the restarted MX after SIGTERM')).code, 0, 'SIGTERM drains and exits 0');

  await inProcess(async (s) => {
    // readMailbox fails on a row whose body is missing from the blob store.
    const stored = await readMailbox(s.storage, box.mailboxes.INBOX!.id);
    const ids = new Set(stored.map((m) => m.messageId));
    t.same(
      [...acked].filter((id) => !ids.has(id)),
      [],
      `every acknowledged message is stored (${acked.size} acknowledged, ${stored.length} stored)`,
    );
    for (const m of stored) {
      const i = Number(/^m(\d+)@/.exec(m.messageId ?? '')?.[1]);
      if (!m.body.equals(message(i))) t.fail(`message ${m.messageId}: body differs from what was sent`);
    }
    t.equal(stored.length, ids.size, 'no message stored twice (no client sent one again)');
    t.equal(
      (await inboxNow(s.storage, box.inbox.id)).usedBytes,
      stored.reduce((sum, m) => sum + m.size, 0),
      'used bytes is the sum of the stored sizes',
    );
  });
});
