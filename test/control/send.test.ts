// docs/api.md §4.11 sendEmail: validation, the sender check, suppression, idempotency (docs/decisions.md #3),
// the daily quota (§8, docs/decisions.md #11, #13), header injection, durability before the answer,
// send-on-behalf and the test-message routes.
import t from 'tap';
import { randomUUID } from 'node:crypto';
import { startTestService, type TestService } from '../helpers/service.js';
import { sender, type Sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';
import { msOfUuidV7, UUID_V7 as V7 } from '../helpers/uuid-v7.js';
import { signHeaders, type Client } from '@svc-mail/sdk';
import { sendMessage, type OutgoingMessage } from '../../core/send.js';
import { parseWithPython } from '../helpers/python-email.js';
import { waitForLockWait } from '../helpers/wait-for.js';
import { openPostgres } from '../../storage/pg/client.js';

const headerBlock = (raw: Buffer) => raw.toString('utf8').split('\r\n\r\n')[0]!;
const header = (raw: Buffer, name: string) =>
  new RegExp(`^${name}: (.*(?:\\r\\n[ \\t].*)*)`, 'mi').exec(headerBlock(raw))?.[1]?.replace(/\r\n[ \t]/g, ' ') ?? null;

t.test('sendEmail: accepted, durable, composed, recorded', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const before = Date.now();
  const res = await s.key.v1.services.sendEmail({
    from: `Ada <ada@${s.domain}>`,
    to: 'Bob@Example.COM',
    subject: 'Hello',
    text: 'Hi Bob',
    html: '<p>Hi Bob</p>',
  });
  t.equal(res.status, 'queued');
  // docs/decisions.md #73: a UUIDv7 (RFC 9562 §5.7), its first 48 bits the milliseconds when it was accepted.
  t.match(res.providerMessageId, V7);
  const ms = msOfUuidV7(res.providerMessageId);
  t.ok(ms >= before && ms <= Date.now(), 'its time is when it was sent');

  const { spool, db } = svc.running.storage;
  const entry = spool.get(res.providerMessageId);
  t.ok(entry, 'spooled');
  t.equal(entry?.rcptTo, 'Bob@example.com', 'recipient domain lower-cased, local part kept');
  t.equal(entry?.domain, 'example.com');
  t.match(
    entry?.mailFrom,
    new RegExp(`@bounces\\.${s.domain.replace(/\./g, '\\.')}$`),
    'VERP return path on the return-path subdomain',
  );
  const raw = spool.body(res.providerMessageId)!;
  // Said of the composed bytes, and true of them (the DKIM signer takes it without looking).
  t.equal(entry?.crlfOnly, true, 'marked CRLF-only');
  t.notMatch(raw.toString('latin1'), /\r(?!\n)|(?<!\r)\n/, 'and so it is');
  t.equal(header(raw, 'From'), `Ada <ada@${s.domain}>`);
  t.equal(header(raw, 'To'), '<Bob@example.com>', 'a bare address in angle brackets');
  t.equal(header(raw, 'Subject'), 'Hello');
  const messageId = header(raw, 'Message-ID') ?? '';
  t.match(
    messageId,
    new RegExp(`^<[0-9a-f-]{36}@${s.domain.replace(/\./g, '\\.')}>$`),
    'Message-ID on the sender domain',
  );
  t.notOk(messageId.includes(res.providerMessageId), 'unrelated to the message id (docs/decisions.md #53)');
  t.notOk(entry?.mailFrom.includes(messageId.slice(1, 37).replace(/-/g, '')), 'and to the return path');
  t.ok(header(raw, 'Date'), 'Date');
  t.equal(header(raw, 'MIME-Version'), '1.0');
  t.match(header(raw, 'Content-Type'), /^multipart\/alternative/);

  const rows = await db.query<{ status: string }>('SELECT status FROM messages WHERE id = $1', [res.providerMessageId]);
  t.same(
    rows.map((r) => r.status),
    ['queued'],
  );
  const events = await db.query<{ type: string; id: string }>(
    'SELECT type, id FROM message_events WHERE message_id = $1 ORDER BY seq',
    [res.providerMessageId],
  );
  t.same(
    events.map((e) => e.type),
    ['queued'],
  );
  t.match(events[0]?.id, V7, 'its event id too');

  const next = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'bob@example.com',
    subject: 'Again',
    text: 'x',
  });
  t.ok(next.providerMessageId > res.providerMessageId, 'a later message has a greater id');

  await svc.restart();
  t.ok(svc.running.storage.spool.body(res.providerMessageId), 'the body survives a restart');
  // The restarted service listens on a new port: a new client.
  const owner = svc.client({ keyId: s.owner.tokenId, secret: s.owner.secret });
  const detail = await owner.console.organizations.get({ id: s.orgId });
  t.equal(detail.usage.usedToday, 2, 'both counted in usage');
});

t.test('display-name rule (docs/api.md §4.11)', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc, { displayName: 'Acme Support' });
  const from = async (f: string) =>
    header(
      svc.running.storage.spool.body(
        (await s.key.v1.services.sendEmail({ from: f, to: 'r@example.com', subject: 's', text: 'x' }))
          .providerMessageId,
      )!,
      'From',
    );
  t.equal(await from(`help@${s.domain}`), `Acme Support <help@${s.domain}>`, 'a bare from takes the domain default');
  t.equal(await from(`Jane <jane@${s.domain}>`), `Jane <jane@${s.domain}>`, "the message's own name wins");
  await s.owner.client.console.projects.outbound.displayName({
    id: s.projectId,
    capId: s.outboundId,
    displayName: null,
  });
  t.equal(await from(`help@${s.domain}`), `help@${s.domain}`, 'no default: the bare address');
});

t.test('validation, sender check and header injection', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const other = await sender(svc);
  const ok = { from: `a@${s.domain}`, to: 'r@example.com', subject: 'Hi', text: 'x' };
  const fails = async (body: Record<string, unknown>) => errorOf(s.key.request('POST', '/v1/services/sendEmail', body));

  for (const [what, body, field] of [
    ['subject missing', { ...ok, subject: undefined }, 'body.subject'],
    ['no text, html or template', { ...ok, text: undefined }, 'body.text'],
    ['bad to', { ...ok, to: 'not-an-address' }, 'body.to'],
    ['bad from', { ...ok, from: 'Name <nope>' }, 'body.from'],
    ['CRLF in subject', { ...ok, subject: 'Hi\r\nBcc: victim@example.com' }, 'body.subject'],
    ['LF in to', { ...ok, to: 'r@example.com\nBcc: victim@example.com' }, 'body.to'],
    ['CR in from', { ...ok, from: `a@${s.domain}\rBcc: victim@example.com` }, 'body.from'],
    ['NUL in subject', { ...ok, subject: 'Hi\u0000there' }, 'body.subject'],
    ['lone surrogate in subject', { ...ok, subject: 'Hi \ud83d there' }, 'body.subject'],
    ['idempotencyKey too short', { ...ok, idempotencyKey: 'short' }, 'body.idempotencyKey'],
  ] as const) {
    const e = await fails(body as Record<string, unknown>);
    t.equal(e.status, 400, `${what}: 400`);
    t.ok(
      (e.details as { field: string }[] | undefined)?.some((d) => d.field === field),
      `${what}: details name ${field}`,
    );
  }
  t.equal((await fails({ ...ok, templateId: randomUUID() })).status, 404, 'an unknown template is 404');
  const unverified = await fails({ ...ok, from: `a@${other.domain}` });
  t.same([unverified.status, unverified.code], [422, 'sender_domain_not_verified'], "another project's domain");
  t.same(
    [(await fails({ ...ok, from: 'a@unclaimed.test' })).code],
    ['sender_domain_not_verified'],
    'an unclaimed domain',
  );
  t.same(
    [(await fails({ ...ok, from: `a@sub.${s.domain}` })).code],
    ['sender_domain_not_verified'],
    'a subdomain without its own capability',
  );
  const noScope = await s.owner.client.console.projects.apiKeys.create({ id: s.projectId, scopes: ['messages:read'] });
  t.equal(
    (await errorOf(svc.client({ keyId: noScope.keyId, secret: noScope.secret }).v1.services.sendEmail(ok))).status,
    403,
    'a key without messages:send',
  );
  t.equal(
    (await errorOf(s.owner.client.request('POST', '/v1/services/sendEmail', ok))).status,
    401,
    'an account token does not send',
  );
  const big = await fails({ ...ok, html: 'x'.repeat(10 * 1024 * 1024) });
  t.equal(big.status, 413, 'over 10 MB: 413');
  const large = await s.key.v1.services.sendEmail({ ...ok, html: `<p>${'y'.repeat(2 * 1024 * 1024)}</p>` });
  t.equal(large.status, 'queued', 'a 2 MB message is accepted');
  const count = await svc.running.storage.db.query<{ n: number }>('SELECT count(*)::int AS n FROM messages');
  t.equal(count[0]!.n, 1, 'nothing rejected was recorded');
});

t.test('the sender check sees a removed capability at once, though the service caches capabilities', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const ok = { from: `a@${s.domain}`, to: 'r@example.com', subject: 'Hi', text: 'x' };
  const first = await s.key.v1.services.sendEmail(ok);
  t.equal(first.status, 'queued', 'sent once: the capability is now cached');
  await s.owner.client.console.projects.outbound.delete({ id: s.projectId, capId: s.outboundId });
  const e = await errorOf(s.key.v1.services.sendEmail(ok));
  t.same([e.status, e.code], [422, 'sender_domain_not_verified'], 'the next send is refused');
  const { db, spool } = svc.running.storage;
  const rows = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM messages');
  t.equal(rows[0]!.n, 1, 'no row for the refused send');
  t.same(
    spool.list(10).map((x) => x.id),
    [first.providerMessageId],
    'and nothing spooled for it',
  );
  const quota = await db.query<{ accepted: number }>('SELECT accepted FROM quota_days WHERE organization_id = $1', [
    s.orgId,
  ]);
  t.same(
    quota.map((q) => q.accepted),
    [1],
    'nor counted',
  );
});

t.test('a send whose cached capability went stale is composed again as the domain now stands', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const { db, spool } = svc.running.storage;
  const ok = { from: `a@${s.domain}`, to: 'r@example.com', subject: 'Hi', text: 'x' };
  const first = await s.key.v1.services.sendEmail(ok);
  t.equal(first.status, 'queued', 'sent once: the capability is now cached');
  // Changed behind this process's cache, as another control process would: the accept statement finds the cached
  // capability stale (its default display name), and the send looks it up again and composes anew.
  await db.query('UPDATE outbound_capabilities SET default_display_name = $2 WHERE id = $1', [
    s.outboundId,
    'Ada Support',
  ]);
  // Over 16 kB: read into a pooled buffer (control/middleware/body-pool.ts), which the second composition reads again.
  const text = `Composed twice, every word kept: ${'lorem ipsum '.repeat(3000)}end.`;
  const second = await s.key.v1.services.sendEmail({ ...ok, text });
  t.equal(second.status, 'queued', 'accepted on the second composition');
  const raw = spool.body(second.providerMessageId)?.toString('latin1') ?? '';
  t.match(raw, /^From: Ada Support <a@/m, 'the message carries the display name the domain has now');
  const decoded = raw.replace(/=\r\n/g, '').replace(/\r\n/g, '\n');
  t.ok(decoded.includes(text), 'and the whole text');
  const rows = await db.query<{ id: string; from_header: string }>('SELECT id, from_header FROM messages');
  t.same(
    Object.fromEntries(rows.map((r) => [r.id, r.from_header])),
    { [first.providerMessageId]: `a@${s.domain}`, [second.providerMessageId]: `Ada Support <a@${s.domain}>` },
    'one row for the send, with the new name',
  );
  t.same(
    spool
      .list(10)
      .map((x) => x.id)
      .sort(),
    [first.providerMessageId, second.providerMessageId].sort(),
    'and the first composition taken back from the spool',
  );
});

t.test('large bodies sent at once and one after another each spool their own words', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const { spool } = svc.running.storage;
  // Sizes across three of the pool's classes, so that a buffer given back is lent again to a later body of its class
  // (control/middleware/body-pool.ts) while others of that class are in flight.
  const texts = Array.from(
    { length: 24 },
    (_, i) => `Body ${i}: ${`word${i} `.repeat(4000 + 3000 * (i % 3))}end ${i}.`,
  );
  const send = (text: string) =>
    s.key.v1.services.sendEmail({ from: `a@${s.domain}`, to: 'r@example.com', subject: 'Hi', text });
  const sent = [
    ...(await Promise.all(texts.slice(0, 12).map(send))),
    ...(await Promise.all(texts.slice(12).map(send))),
  ];
  const spooled = sent.map((m) => {
    const raw = spool.body(m.providerMessageId)?.toString('latin1') ?? '';
    return raw
      .slice(raw.indexOf('\r\n\r\n') + 4)
      .replace(/=\r\n/g, '')
      .replace(/\r\n/g, '\n')
      .trimEnd();
  });
  t.same(spooled, texts, 'each message holds the text it was sent with, whole');
});

t.test('a send given its body to reread lets go of the text and html once composed', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const deps = { ctx: svc.running.ctx, storage: svc.running.storage };
  const now = new Date(svc.clock.now());
  const message = (): OutgoingMessage => ({
    from: `a@${s.domain}`,
    to: 'r@example.com',
    subject: 'Hi',
    text: 'plain words',
    html: '<p>html words</p>',
  });
  const kept = message();
  await sendMessage(deps, kept, s.projectId, now);
  t.same([kept.text, kept.html], ['plain words', '<p>html words</p>'], "without it, the caller's message is untouched");
  const given = message();
  let rereads = 0;
  const sent = await sendMessage(deps, given, s.projectId, now, { reread: () => (rereads++, message()) });
  t.same([given.text, given.html], [undefined, undefined], 'with it, both are gone once composed');
  t.equal(rereads, 0, 'and nothing is read again while the capability stands');
  const raw = svc.running.storage.spool.body(sent.messageId)?.toString('latin1') ?? '';
  t.ok(raw.includes('plain words') && raw.includes('<p>html words</p>'), 'the message holds both');
});

t.test('a suppressed recipient is accepted as suppressed and never spooled', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  await svc.running.storage.db.query(
    `INSERT INTO suppressions (project_id, address, reason, created_at)
     VALUES ($1, 'gone@example.com', 'hard_bounce', now())`,
    [s.projectId],
  );
  const res = await s.key.v1.services.sendEmail({
    from: `a@${s.domain}`,
    to: 'gone@EXAMPLE.com',
    subject: 's',
    text: 'x',
  });
  t.equal(res.status, 'suppressed');
  t.notOk(svc.running.storage.spool.get(res.providerMessageId), 'not spooled');
  const events = await svc.running.storage.db.query<{ type: string }>(
    'SELECT type FROM message_events WHERE message_id = $1',
    [res.providerMessageId],
  );
  t.same(
    events.map((e) => e.type),
    ['suppressed'],
  );
});

t.test('idempotency (docs/decisions.md #3)', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const body = {
    from: `a@${s.domain}`,
    to: 'r@example.com',
    subject: 'once',
    text: 'x',
    idempotencyKey: 'order-12345',
  };
  const send = () => fetchSend(svc, s, body);
  const first = await send();
  const again = await send();
  t.equal(first.status, 200);
  t.equal(again.status, 200);
  t.equal(again.json.providerMessageId, first.json.providerMessageId, 'the same providerMessageId');
  t.equal(again.replayed, 'true', 'Idempotent-Replayed: true');
  t.equal(first.replayed, null, 'the first answer is not a replay');
  const reused = await errorOf(s.key.v1.services.sendEmail({ ...body, subject: 'different' }));
  t.same([reused.status, reused.code], [409, 'idempotency_key_reused']);
  // The text is hashed before the send lets go of it (core/send.ts, SendOptions.reread).
  const otherText = await errorOf(s.key.v1.services.sendEmail({ ...body, text: 'y' }));
  t.same([otherText.status, otherText.code], [409, 'idempotency_key_reused'], 'nor with another text');
  svc.clock.advance(24 * 3_600_000 + 1000);
  const later = await s.key.v1.services.sendEmail(body);
  t.not(later.providerMessageId, first.json.providerMessageId, 'after 24 h the key is new again');

  const concurrent = await Promise.all(
    Array.from({ length: 10 }, () => s.key.v1.services.sendEmail({ ...body, idempotencyKey: 'concurrent-1' })),
  );
  t.equal(new Set(concurrent.map((r) => r.providerMessageId)).size, 1, 'concurrent repeats share one message');
  const rows = await svc.running.storage.db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM messages WHERE idempotency_key = 'concurrent-1'",
  );
  t.equal(rows[0]!.n, 1, 'exactly one queued');
});

t.test('concurrent sends with idempotency keys share a statement, each answered as alone', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const deps = { ctx: svc.running.ctx, storage: svc.running.storage };
  const { db } = svc.running.storage;
  const send = (key: string, subject = 'once') =>
    sendMessage(
      deps,
      { from: `a@${s.domain}`, to: 'r@example.com', subject, text: 'x', idempotencyKey: `key-${key}` },
      s.projectId,
      new Date(svc.clock.now()),
    );
  const keys = ['a1', 'a2', 'a3', 'a4', 'a5', 'a6', 'a7', 'a8'];
  // Made together, the sends reach the accepting step together (from one flush of the spool) and share it.
  const first = await Promise.all(keys.map((k) => send(k)));
  t.equal(new Set(first.map((r) => r.messageId)).size, 8, 'eight messages');
  t.ok(
    first.every((r) => r.status === 'queued' && !r.replayed),
    'each queued, none a replay',
  );
  const [{ n } = { n: -1 }] = await db.query<{ n: number }>(
    "SELECT count(DISTINCT xmin::text)::int AS n FROM messages WHERE idempotency_key LIKE 'key-a%'",
  );
  t.ok(n < 8, `their rows were written by fewer transactions than sends (${n})`);

  // Two messages left today; a replay, a key reused with another body and four new keys, together.
  const today = new Date(svc.clock.now()).toISOString().slice(0, 10);
  await db.query('UPDATE quota_days SET accepted = 498 WHERE organization_id = $1 AND day = $2', [s.orgId, today]);
  const burst = await Promise.allSettled([
    send('a1'),
    send('a2', 'another subject'),
    ...['b1', 'b2', 'b3', 'b4'].map((k) => send(k)),
  ]);
  const replay = burst[0]!;
  t.ok(replay.status === 'fulfilled' && replay.value.replayed, 'the same key and body: a replay');
  t.equal(replay.status === 'fulfilled' && replay.value.messageId, first[0]!.messageId, "of the first send's message");
  t.match(burst[1], { status: 'rejected', reason: { code: 'idempotency_key_reused' } }, 'another body: reused');
  const fresh = burst.slice(2);
  const passed = fresh.filter((r) => r.status === 'fulfilled');
  t.equal(passed.length, 2, "two of the new keys fit today's quota");
  t.ok(
    fresh.every((r) => r.status === 'fulfilled' || (r.reason as { code?: string }).code === 'quota_exceeded'),
    'the others are refused for the quota',
  );
  // A refused send took no key: the next day the same key and body send a new message, not a replay.
  svc.clock.advance(24 * 3_600_000);
  const refusedKeys = ['b1', 'b2', 'b3', 'b4'].filter((_, i) => fresh[i]!.status === 'rejected');
  const retried = await Promise.all(refusedKeys.map((k) => send(k)));
  t.ok(
    retried.every((r) => r.status === 'queued' && !r.replayed),
    'their keys were given back',
  );
  const rows = await db.query<{ n: number }>(
    "SELECT count(*)::int AS n FROM messages WHERE idempotency_key LIKE 'key-b%'",
  );
  t.equal(rows[0]!.n, 4, 'one message a new key');
});

// Without SVC_DATABASE_URL this test is skipped, not passed: a transaction held open beside a send needs a second
// connection, which the embedded database does not have; the SVC_DATABASE_URL pass of .ci/run runs it.
const skipEmbedded = process.env.SVC_DATABASE_URL ? false : 'needs a real Postgres (a second connection)';

t.test(
  'a key taken while a send was being accepted answers the send, which writes nothing',
  { skip: skipEmbedded },
  async (t) => {
    const svc = await startTestService(t);
    const s = await sender(svc);
    const { db } = svc.running.storage;
    const body = {
      from: `a@${s.domain}`,
      to: 'r@example.com',
      subject: 'race',
      text: 'x',
      idempotencyKey: 'race-order-1',
    };
    const first = await fetchSend(svc, s, body);
    t.equal(first.status, 200);
    // A day on, the key has expired: the same send would make a new message. Meanwhile another transaction takes the
    // key again (as a concurrent send elsewhere would) and holds it uncommitted while the send's statement runs: the
    // statement, which saw the key expired as it began, waits for that row at its upsert.
    svc.clock.advance(24 * 3_600_000 + 1000);
    const other = openPostgres(svc.databaseUrl!, 1);
    t.teardown(() => other.close());
    let answer: ReturnType<typeof fetchSend> | undefined;
    await other.tx(async (q) => {
      const now = svc.clock.now();
      await q.query(
        "UPDATE idempotency_keys SET created_at = $1, expires_at = $2 WHERE project_id = $3 AND key = 'race-order-1'",
        [new Date(now), new Date(now + 24 * 3_600_000), s.projectId],
      );
      answer = fetchSend(svc, s, body);
      await waitForLockWait(db, "the send's statement waiting for the key's row");
    });
    const second = await answer!;
    t.equal(second.status, 200);
    t.equal(second.json.providerMessageId, first.json.providerMessageId, "the key's holder answers: the first message");
    t.equal(second.replayed, 'true', 'as a replay');
    const rows = await db.query<{ n: number }>(
      "SELECT count(*)::int AS n FROM messages WHERE idempotency_key = 'race-order-1'",
    );
    t.equal(rows[0]!.n, 1, 'the statement that met the held key wrote no message');
  },
);

/** sendEmail over raw fetch (signed with the SDK's signer), to read the Idempotent-Replayed header. */
async function fetchSend(svc: TestService, s: Sender, body: unknown) {
  const raw = JSON.stringify(body);
  const res = await fetch(`${svc.url}/v1/services/sendEmail`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(await signHeaders({
        method: 'POST',
        target: '/v1/services/sendEmail',
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
    json: (await res.json()) as { providerMessageId: string },
    replayed: res.headers.get('idempotent-replayed'),
  };
}

t.test('the daily quota is shared by the organization, race-safe (docs/api.md §8)', async (t) => {
  const svc = await startTestService(t);
  svc.clock.freeze();
  const s = await sender(svc);
  // Six keys in two projects of the same organization, so no key's rate limit (100 burst) interferes.
  const keys: Client[] = [];
  for (let i = 0; i < 6; i++) {
    const k = await s.owner.client.console.projects.apiKeys.create({ id: s.projectId, scopes: ['messages:send'] });
    keys.push(svc.client({ keyId: k.keyId, secret: k.secret }));
  }
  const results = await Promise.all(
    Array.from({ length: 600 }, (_, i) =>
      keys[i % 6]!.v1.services.sendEmail({
        from: `q@${s.domain}`,
        to: `r${i}@example.com`,
        subject: 'q',
        text: 'x',
      }).then(
        () => 200,
        (e: { status: number; code: string }) => (e.code === 'quota_exceeded' ? 429 : e.status * 1000),
      ),
    ),
  );
  t.equal(results.filter((r) => r === 200).length, 500, 'exactly 500 accepted');
  t.equal(results.filter((r) => r === 429).length, 100, 'exactly 100 answered 429 quota_exceeded');
  const usage = (await s.owner.client.console.organizations.get({ id: s.orgId })).usage;
  t.match(usage, { tier: 'free', dailyLimit: 500, usedToday: 500, remaining: 0, overageToday: 0 });

  await s.owner.client.console.organizations.plan({ id: s.orgId, plan: 'payg' });
  // Each key spent its 100-request burst above: let the buckets refill.
  svc.clock.advance(10_000);
  for (let i = 0; i < 3; i++)
    await keys[0]!.v1.services.sendEmail({ from: `q@${s.domain}`, to: 'p@example.com', subject: 'payg', text: 'x' });
  const payg = (await s.owner.client.console.organizations.get({ id: s.orgId })).usage;
  t.match(
    payg,
    { tier: 'payg', dailyLimit: null, usedToday: 503, remaining: null, overageToday: 3 },
    'payg: no cap, overage counted',
  );

  await s.owner.client.console.organizations.plan({ id: s.orgId, plan: 'free' });
  svc.clock.advance(24 * 3_600_000);
  const tomorrow = await keys[1]!.v1.services.sendEmail({
    from: `q@${s.domain}`,
    to: 'n@example.com',
    subject: 'new day',
    text: 'x',
  });
  t.equal(tomorrow.status, 'queued', 'a new UTC day has a new allowance');
});

t.test('concurrent sends of several organizations share statements; every count stays exact', async (t) => {
  const svc = await startTestService(t);
  svc.clock.freeze();
  const { db } = svc.running.storage;
  const [a, b] = [await sender(svc), await sender(svc)];
  const keysOf = async (s: Sender) =>
    Promise.all(
      Array.from({ length: 3 }, async () => {
        const k = await s.owner.client.console.projects.apiKeys.create({ id: s.projectId, scopes: ['messages:send'] });
        return svc.client({ keyId: k.keyId, secret: k.secret });
      }),
    );
  const [ka, kb] = [await keysOf(a), await keysOf(b)];
  // B has 50 messages left today; five of A's recipients are suppressed.
  await db.query(`INSERT INTO quota_days (organization_id, day, accepted) VALUES ($1, $2, 450)`, [
    b.orgId,
    new Date(svc.clock.now()).toISOString().slice(0, 10),
  ]);
  for (let i = 0; i < 5; i++) {
    await db.query(
      `INSERT INTO suppressions (project_id, address, reason, created_at) VALUES ($1, $2, 'complaint', now())`,
      [a.projectId, `r${i * 7}@example.com`],
    );
  }
  const send = (s: Sender, keys: Client[], i: number) =>
    keys[i % 3]!.v1.services.sendEmail({
      from: `q@${s.domain}`,
      to: `r${i}@example.com`,
      subject: 'q',
      text: 'x',
    }).then(
      (r) => r.status as string,
      (e: { code: string }) => e.code,
    );
  const [ra, rb] = await Promise.all([
    Promise.all(Array.from({ length: 200 }, (_, i) => send(a, ka, i))),
    Promise.all(Array.from({ length: 100 }, (_, i) => send(b, kb, i))),
  ]);
  const tally = (rs: string[]) => rs.reduce<Record<string, number>>((m, r) => ({ ...m, [r]: (m[r] ?? 0) + 1 }), {});
  t.same(tally(ra), { queued: 195, suppressed: 5 }, 'A: all accepted, the suppressed five as suppressed');
  t.same(tally(rb), { queued: 50, quota_exceeded: 50 }, 'B: exactly the 50 left, then 429');
  const rows = await db.query<{ org: string; status: string; n: number; events: number }>(
    `SELECT m.organization_id AS org, m.status, count(*)::int AS n,
       sum((SELECT count(*) FROM message_events e WHERE e.message_id = m.id))::int AS events
     FROM messages m GROUP BY 1, 2 ORDER BY 1, 2`,
  );
  const byOrg = (org: string) =>
    Object.fromEntries(rows.filter((r) => r.org === org).map((r) => [r.status, [r.n, r.events]]));
  t.same(byOrg(a.orgId), { queued: [195, 195], suppressed: [5, 5] }, "A's rows, one event each");
  t.same(byOrg(b.orgId), { queued: [50, 50] }, "B's rows, one event each");
  const quota = await db.query<{ org: string; accepted: number }>(
    'SELECT organization_id AS org, accepted FROM quota_days',
  );
  t.same(
    Object.fromEntries(quota.map((q) => [q.org, q.accepted])),
    { [a.orgId]: 200, [b.orgId]: 500 },
    'the quota rows',
  );
  t.equal(svc.running.storage.spool.count(), 245, 'exactly the queued messages are spooled');
});

t.test('send-on-behalf and the test-message routes', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const onBehalf = await svc
    .admin()
    .v1.services.sendEmail({ from: `ops@${s.domain}`, to: 'r@example.com', subject: 'platform', text: 'x' });
  const row = await svc.running.storage.db.query<{ project_id: string }>(
    'SELECT project_id FROM messages WHERE id = $1',
    [onBehalf.providerMessageId],
  );
  t.equal(row[0]?.project_id, s.projectId, 'the platform key sends for the project owning the domain');
  const orgToken = (await s.owner.client.console.organizations.tokens.create({ id: s.orgId })) as {
    tokenId: string;
    secret: string;
  };
  t.equal(
    (
      await errorOf(
        svc.client({ keyId: orgToken.tokenId, secret: orgToken.secret }).request('POST', '/v1/services/sendEmail', {
          from: `a@${s.domain}`,
          to: 'r@example.com',
          subject: 's',
          text: 'x',
        }),
      )
    ).status,
    401,
    'an organization token never sends',
  );

  const test = await s.owner.client.console.projects.testMessage({
    id: s.projectId,
    from: `test@${s.domain}`,
    to: 'r@example.com',
    subject: 'test',
    text: 'x',
  });
  t.equal(test.status, 'queued', 'console test-message');
  const admin = await svc.admin().admin.testMessage({
    projectId: s.projectId,
    from: `test@${s.domain}`,
    to: 'r@example.com',
    subject: 'test',
    text: 'x',
  });
  t.equal(admin.status, 'queued', 'admin test-message');
  const other = await sender(svc);
  const wrong = await errorOf(
    svc.admin().admin.testMessage({
      projectId: other.projectId,
      from: `test@${s.domain}`,
      to: 'r@example.com',
      subject: 't',
      text: 'x',
    }),
  );
  t.equal(wrong.code, 'sender_domain_not_verified', "a test message for a project from another project's domain");
});

t.test('an audit row that cannot be written never turns a queued message into a 500', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const audits = async () => (await svc.running.storage.db.query('SELECT 1 FROM audit_log')).length;
  const before = await audits();
  // The real database refuses the audit row (a trigger), after the message's own commit. The console's
  // test message is an audited route that queues mail (sendEmail itself writes no audit row).
  await svc.running.storage.db.query(`CREATE FUNCTION refuse_audit() RETURNS trigger AS $$ BEGIN
      RAISE EXCEPTION 'injected audit failure'; END $$ LANGUAGE plpgsql`);
  await svc.running.storage.db.query(
    'CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit()',
  );
  const res = await s.owner.client.console.projects.testMessage({
    id: s.projectId,
    from: `test@${s.domain}`,
    to: 'r@example.com',
    subject: 'audited',
    text: 'x',
  });
  t.equal(res.status, 'queued', 'answered 200 with the message queued');
  const rows = await svc.running.storage.db.query<{ status: string }>(
    'SELECT status FROM messages WHERE subject = $1',
    ['audited'],
  );
  t.same(
    rows.map((r) => r.status),
    ['queued'],
    'one message, queued',
  );
  t.equal(await audits(), before, 'and no audit row');
});

t.test('large messages: the spool holds every octet of a 100 kB sendEmail and of a sendBatch', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const { spool, db } = svc.running.storage;
  const line = (i: number) => `Line ${i}: the quick brown fox jumps over the lazy dog, again and again and again.`;
  const text = (n: number, tag: string) => Array.from({ length: n }, (_, i) => `${tag} ${line(i)}`).join('\n');
  const check = async (id: string, body: string) => {
    const raw = spool.body(id);
    const [row] = await db.query<{ size_bytes: number }>('SELECT size_bytes FROM messages WHERE id = $1', [id]);
    t.equal(raw?.length, row?.size_bytes, `${id}: the spooled body has the size recorded`);
    // Python's email undoes the quoted-printable: the text sent, its line breaks written as CRLF.
    const [part] = (await parseWithPython(raw!)).parts;
    const decoded = part?.content.toString('utf8').replace(/\r\n$/, '').replaceAll('\r\n', '\n');
    t.equal(decoded, body, `${id}: the text whole`);
  };
  const one = text(1200, 'single');
  const res = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'bob@example.com',
    subject: 'big',
    text: one,
  });
  t.ok(one.length > 100_000);
  await check(res.providerMessageId, one);
  const bodies = [text(500, 'first'), text(600, 'second')];
  const batch = await s.key.v1.services.sendBatch({
    messages: bodies.map((b) => ({ from: `ada@${s.domain}`, to: 'bob@example.com', subject: 'big', text: b })),
  });
  for (const [i, r] of batch.data.entries()) await check(r.providerMessageId, bodies[i]!);
});
