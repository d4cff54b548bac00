// Issue 17 item 5: every paged list answers `nextCursor` (null on the last page) and takes it back as `cursor`;
// the SDK's paginate() walks every page. 450 messages, sent within one clock millisecond in part (ties broken
// by id), listed 50 and 200 at a time: each exactly once, newest first; a message sent between two pages
// neither repeats nor hides another; a cursor that is not one is 400 naming query.cursor.
import t from 'tap';
import { listAll, paginate } from '@svc-mail/sdk';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';

t.test('paging through 450 messages with nextCursor and the SDK', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  // Past the free plan's 500 a day nothing would be accepted; payg has no cap.
  await svc.running.storage.db.query(`UPDATE organizations SET plan = 'payg' WHERE id = $1`, [s.orgId]);
  svc.clock.freeze();
  const ids: string[] = [];
  for (let batch = 0; batch < 5; batch++) {
    // 90 a batch at one instant: the list's order (createdAt, then id) must break the ties.
    const r = await s.key.v1.services.sendBatch({
      messages: Array.from({ length: 90 }, (_, i) => ({
        from: `ada@${s.domain}`,
        to: `r${batch}-${i}@example.com`,
        subject: `m ${batch} ${i}`,
        text: 'x',
      })),
    });
    ids.push(...r.data.map((d) => d.providerMessageId));
    svc.clock.advance(1000);
  }

  const first = await s.key.v1.messages.list({ limit: 50 });
  t.equal(first.rows.length, 50, 'a page of 50');
  t.type(first.nextCursor, 'string', 'with a cursor to the next');

  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: { rows: { id: string }[]; nextCursor: string | null } = await s.key.v1.messages.list({
      limit: 200,
      ...(cursor ? { cursor } : {}),
    });
    seen.push(...page.rows.map((r) => r.id));
    cursor = page.nextCursor;
    pages++;
    // A message sent between two pages is newer than every page's rows: it must not shift the next page.
    if (pages === 1)
      await s.key.v1.services.sendEmail({
        from: `ada@${s.domain}`,
        to: 'late@example.com',
        subject: 'late',
        text: 'x',
      });
  } while (cursor);
  t.equal(pages, 3, '450 rows at 200 a page: three pages, the last one without nextCursor');
  t.equal(seen.length, 450, 'each of the 450 once');
  t.same(new Set(seen).size, 450, 'no row twice');
  t.same([...seen].sort(), [...ids].sort(), 'exactly the messages sent');

  const all = await listAll(s.key.v1.messages.list, { limit: 50 });
  t.equal(all.length, 451, 'listAll: every message, the late one too');
  t.same(
    all.map((m) => m.createdAt),
    [...all.map((m) => m.createdAt)].sort().reverse(),
    'newest first across pages',
  );
  let n = 0;
  const viaConsole = await listAll(s.owner.client.console.projects.messages, { id: s.projectId, limit: 200 });
  t.same(
    viaConsole.map((m) => m.id),
    all.map((m) => m.id),
    'the console list pages the same way, in the same order',
  );
  const viaAdmin = await listAll(svc.admin().admin.messages.list, { projectId: s.projectId, status: 'queued' });
  t.equal(viaAdmin.length, 451, 'and the admin list');
  const audit = await s.owner.client.console.projects.audit({ id: s.projectId, limit: 1 });
  t.equal(audit.entries.length, 1, 'the audit list pages too');
  t.type(audit.nextCursor, 'string');
  for await (const m of paginate(s.key.v1.messages.list, { status: 'queued', limit: 100 }))
    if (m.status === 'queued') n++;
  t.equal(n, 451, 'paginate() with a filter');

  const forged = Buffer.from('["yesterday","not-a-uuid"]').toString('base64url');
  for (const bad of ['not-a-cursor!', Buffer.from('["a"]').toString('base64url'), 'e30', forged]) {
    const e = await errorOf(s.key.v1.messages.list({ cursor: bad }));
    t.same(
      [e.status, e.code, (e.details as { field: string }[])[0]?.field],
      [400, 'invalid_request', 'query.cursor'],
      `cursor ${bad}`,
    );
  }
});
