// docs/api.md §4.11 sendBatch (issue 16 item 7): 1 to 100 sendEmail bodies, all or none. Any invalid item is a
// 400 whose details name the item and its field (body.messages.<i>.<field>) and nothing is queued; the answer
// is a result per message in order; the batch's idempotencyKey replays the whole; the quota refuses it whole.
import t from 'tap';
import { startTestService, type TestService } from '../helpers/service.js';
import { sender, type Sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';
import { signHeaders } from '@svc-mail/sdk';

type Detail = { field: string; message: string };
const fieldsOf = (err: { details?: unknown }) => [...new Set(((err.details ?? []) as Detail[]).map((d) => d.field))];

/** sendBatch over raw fetch (signed with the SDK's signer), to read the Idempotent-Replayed header. */
async function fetchBatch(svc: TestService, s: Sender, body: unknown) {
  const raw = JSON.stringify(body);
  const res = await fetch(`${svc.url}/v1/services/sendBatch`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(await signHeaders({
        method: 'POST',
        target: '/v1/services/sendBatch',
        body: raw,
        keyId: s.keyId,
        secret: s.keySecret,
        timestamp: String(svc.clock.now()),
      })),
    },
    body: raw,
  });
  return {
    status: res.status,
    json: (await res.json()) as { data: { providerMessageId: string; status: string }[] },
    replayed: res.headers.get('idempotent-replayed'),
  };
}

t.test('sendBatch: results in order, all or nothing, replay, quota', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const other = await sender(svc);
  const db = svc.running.storage.db;
  const { spool } = svc.running.storage;
  const msg = (to: string | string[], extra: Record<string, unknown> = {}) => ({
    from: `ada@${s.domain}`,
    to,
    subject: 'Hi',
    text: 'x',
    ...extra,
  });
  const count = async () => (await db.query('SELECT id FROM messages')).length;
  await s.owner.client.console.projects.suppressions.create({ id: s.projectId, address: 'sup@dest.test' });

  await t.test('every refusal names its item and field; nothing is queued', async (t) => {
    const cases: [string, unknown, string[], number?][] = [
      ['no messages', { messages: [] }, ['body.messages']],
      ['101 messages', { messages: Array.from({ length: 101 }, () => msg('a@dest.test')) }, ['body.messages']],
      ['one bad item', { messages: [msg('a@dest.test'), msg('nobody'), msg('b@dest.test')] }, ['body.messages[1].to']],
      [
        'two bad items, each named',
        {
          messages: [
            msg('a@dest.test', { cc: ['c@dest.test', 'not-an-address'] }),
            msg('b@dest.test'),
            msg('c@dest.test', { headers: { Received: 'x' }, subject: 'a\r\nb' }),
          ],
        },
        ['body.messages[0].cc[1]', 'body.messages[2].subject'],
      ],
      [
        'an item over 50 recipients',
        {
          messages: [
            msg(
              Array.from({ length: 30 }, (_, i) => `t${i}@dest.test`),
              { bcc: Array.from({ length: 21 }, (_, i) => `b${i}@dest.test`) },
            ),
          ],
        },
        ['body.messages[0]'],
      ],
      [
        'an item with its own idempotencyKey',
        { messages: [msg('a@dest.test', { idempotencyKey: 'k-12345678' })] },
        ['body.messages[0].idempotencyKey'],
      ],
      [
        'an item without subject',
        { messages: [msg('a@dest.test', { subject: undefined })] },
        ['body.messages[0].subject'],
      ],
      ['an unknown top-level field', { messages: [msg('a@dest.test')], to: 'x@dest.test' }, ['body.to']],
      [
        "an item from another project's domain",
        { messages: [msg('a@dest.test'), msg('b@dest.test', { from: `x@${other.domain}` })] },
        ['body.messages[1].from'],
        422,
      ],
    ];
    for (const [what, body, fields, status] of cases) {
      const e = await errorOf(s.key.request('POST', '/v1/services/sendBatch', body));
      t.equal(e.status, status ?? 400, `${what}: ${status ?? 400}`);
      t.same(fieldsOf(e), fields, `${what}: names ${fields.join(', ')}`);
    }
    t.equal(await count(), 0, 'no message row');
    t.equal(spool.count(), 0, 'nothing spooled');
  });

  await t.test('a batch: one result per message, in order, durable', async (t) => {
    const res = await s.key.v1.services.sendBatch({
      messages: [
        msg('one@dest.test'),
        msg('sup@dest.test'),
        msg(['a@dest.test', 'b@other.test'], { cc: 'sup@dest.test', tags: [{ name: 'k', value: 'v' }] }),
      ],
    });
    t.same(
      res.data.map((r) => r.status),
      ['queued', 'suppressed', 'queued'],
    );
    const rows = await Promise.all(res.data.map((r) => s.key.v1.messages.get({ id: r.providerMessageId })));
    t.same(
      rows.map((r) => r.row.to),
      ['one@dest.test', 'sup@dest.test', 'a@dest.test'],
      'in the order given',
    );
    t.same(rows[2]!.row.tags, [{ name: 'k', value: 'v' }]);
    t.same(
      rows[2]!.row.recipients.map((r) => r.status),
      ['queued', 'queued', 'suppressed'],
    );
    t.ok(spool.get(res.data[0]!.providerMessageId), 'spooled');
    t.equal(spool.get(res.data[1]!.providerMessageId), undefined, 'the suppressed one is not');
    t.ok(spool.get(res.data[2]!.providerMessageId));
  });

  await t.test('idempotencyKey covers the batch', async (t) => {
    const body = { idempotencyKey: 'batch-key-0001', messages: [msg('p@dest.test'), msg('q@dest.test')] };
    const first = await fetchBatch(svc, s, body);
    const again = await fetchBatch(svc, s, body);
    t.equal(first.status, 200);
    t.equal(first.replayed, null);
    t.equal(again.replayed, 'true', 'Idempotent-Replayed: true');
    t.same(again.json, first.json, 'the same messages, in order');
    const before = await count();
    const reused = await fetchBatch(svc, s, { ...body, messages: [msg('p@dest.test')] });
    t.equal(reused.status, 409, 'another body: 409');
    const asSend = await errorOf(
      s.key.v1.services.sendEmail({ ...msg('p@dest.test'), idempotencyKey: 'batch-key-0001' }),
    );
    t.equal(asSend.code, 'idempotency_key_reused', 'a sendEmail with the batch key: 409');
    t.equal(await count(), before, 'nothing more queued');
  });

  await t.test('the quota refuses the whole batch', async (t) => {
    const day = new Date(svc.clock.now()).toISOString().slice(0, 10);
    await db.query('UPDATE quota_days SET accepted = 498 WHERE organization_id = $1 AND day = $2', [s.orgId, day]);
    const before = await count();
    const spooled = spool.count();
    const e = await errorOf(
      s.key.v1.services.sendBatch({ messages: [msg('a@dest.test'), msg(['b@dest.test', 'c@dest.test'])] }),
    );
    t.same([e.status, e.code], [429, 'quota_exceeded'], 'three recipients, two left');
    t.equal(await count(), before, 'nothing queued');
    t.equal(spool.count(), spooled, 'every body taken back');
    const ok = await s.key.v1.services.sendBatch({ messages: [msg('a@dest.test'), msg('d@dest.test')] });
    t.same(
      ok.data.map((r) => r.status),
      ['queued', 'queued'],
      'two fit',
    );
  });

  await t.test('scope messages:send', async (t) => {
    const k = await s.owner.client.console.projects.apiKeys.create({ id: s.projectId, scopes: ['messages:read'] });
    const e = await errorOf(
      svc.client({ keyId: k.keyId, secret: k.secret }).v1.services.sendBatch({ messages: [msg('a@dest.test')] }),
    );
    t.equal(e.status, 403);
  });
});
