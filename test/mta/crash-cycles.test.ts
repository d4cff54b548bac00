// Issue 15 item 5: `kill -9` at random moments, again and again, against a real Postgres: twenty cycles of a
// `svc start` child taking sends and delivering them, each ended by SIGKILL after a random few hundred
// milliseconds (during a send, a commit, a delivery or none). Then one last start, and two facts: every
// message that was answered 200 reached the sink, and every message row ended in a final state (delivered,
// bounced, failed, suppressed), none left queued, sending or deferred: also the rows whose commit landed just
// before a kill and whose client never heard back. Postgres only (the Postgres pass of .ci/run).
import t from 'tap';
import { randomInt } from 'node:crypto';
import { startDestination } from '../helpers/delivery-world.js';
import { clientsFor } from '../helpers/service.js';
import { exitWithin, listening, serviceEnv, svc, tempDir, SERVER_URL, type Svc } from '../helpers/child.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { openPostgres } from '../../storage/pg/client.js';

const CYCLES = 20;
const CONCURRENCY = 8;

if (!SERVER_URL) t.plan(0, 'skip: needs a real Postgres (SVC_DATABASE_URL); runs in the Postgres pass of .ci/run');
else
  t.test(`kill -9 at random moments, ${CYCLES} times: nothing acknowledged lost, every row final`, async (t) => {
    const { zone, sink } = await startDestination(t);
    const dataDir = await tempDir(t);
    const env: Record<string, string> = {
      ...(await serviceEnv(t, { dataDir, dns: zone.hostPort, outboundPort: sink.port })),
      // One process, killed at random moments: what a crash of a worker under SVC_WORKERS does to its leases is
      // test/cli/cluster.test.ts's and the spool's lease tests' concern.
      SVC_WORKERS: '1',
    };
    const boot = async (): Promise<{ child: Svc; url: string }> => {
      const child = svc(t, ['start'], env);
      const line = await listening(child);
      return { child, url: String(line.publicUrl) };
    };

    let current = await boot();
    const clients = clientsFor(() => current.url);
    const s = await sender(clients);
    // Past the free plan's 500 a day the cycles would only be refused.
    await s.owner.client.console.organizations.plan({ id: s.orgId, plan: 'payg' });
    const acked = new Set<string>();
    let n = 0;

    for (let cycle = 0; cycle < CYCLES; cycle++) {
      let killed = false;
      let ackedNow = 0;
      // A client of this start's port (an SDK client keeps the base URL it was made with).
      const key = clients.client({ keyId: s.keyId, secret: s.keySecret });
      const worker = async () => {
        while (!killed) {
          const i = n++;
          try {
            const r = await key.v1.services.sendEmail({
              from: `ada@${s.domain}`,
              to: `r${i}@dest.test`,
              subject: `cycle ${cycle} message ${i}`,
              text: `message ${i}`,
            });
            acked.add(r.providerMessageId);
            ackedNow++;
          } catch {
            // A 429 from the key's bucket: a moment's wait. A failure from the kill: not acknowledged, not owed.
            if (!killed) await new Promise((r) => setTimeout(r, 50));
          }
        }
      };
      const sending = Promise.all(Array.from({ length: CONCURRENCY }, worker));
      // Sends under way (and deliveries with them), then the kill at a random moment.
      await waitFor(() => ackedNow >= 5, { timeoutMs: 30_000, what: `sends acknowledged in cycle ${cycle}` });
      await new Promise((r) => setTimeout(r, randomInt(0, 400)));
      current.child.child.kill('SIGKILL');
      killed = true;
      await exitWithin(current.child, `the service after SIGKILL in cycle ${cycle}`);
      await sending;
      current = await boot();
    }
    t.ok(acked.size >= 5 * CYCLES, `${acked.size} acknowledged over ${CYCLES} kills`);

    // The message id of each delivered copy, from its VERP return path (mail/verp.ts).
    const idOf = (mailFrom: string) => {
      const h = /^b-([0-9a-f]{32})-/.exec(mailFrom)?.[1];
      return h && `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    };
    const missing = () => {
      const seen = new Set(sink.messages.map((m) => idOf(m.mailFrom)));
      return [...acked].filter((id) => !seen.has(id));
    };
    await waitFor(() => missing().length === 0, {
      timeoutMs: 120_000,
      everyMs: 200,
      what: `every acknowledged message at the sink (missing ${missing().length})`,
    });
    t.same(missing(), [], `all ${acked.size} acknowledged messages delivered`);

    const db = openPostgres(env.SVC_DATABASE_URL!, 1);
    t.teardown(() => db.close());
    const unfinished = () =>
      db.query<{ id: string; status: string }>(
        "SELECT id, status FROM messages WHERE status NOT IN ('delivered', 'bounced', 'failed', 'suppressed')",
      );
    await waitFor(async () => (await unfinished()).length === 0, {
      timeoutMs: 120_000,
      everyMs: 200,
      what: 'every message row in a final state',
    });
    t.same(await unfinished(), [], 'no row left queued, sending or deferred');
    const [{ rows }] = (await db.query<{ rows: number }>('SELECT count(*)::int AS rows FROM messages')) as [
      { rows: number },
    ];
    t.ok(rows >= acked.size, `${rows} rows, ${rows - acked.size} of them committed but never answered`);

    current.child.child.kill('SIGTERM');
    t.equal((await exitWithin(current.child, 'the last service after SIGTERM')).code, 0, 'SIGTERM drains and exits 0');
  });
