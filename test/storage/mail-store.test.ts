// The mail store (storage/pg/mail-store.ts) and its change feed on a real Storage handle: the embedded
// database, or the Postgres of SVC_DATABASE_URL (then also a second handle on the same database, woken
// through LISTEN/NOTIFY). UID and MODSEQ only grow, used_bytes is exact under concurrency, every change
// is journaled in its own transaction, and blob references follow the rows.
import t, { type Test } from 'tap';
import { randomBytes, randomUUID } from 'node:crypto';
import type { Mailbox, MailStore } from '../../mail/mail-store.js';
import { applyFlagChange, normalizeFlags } from '../../mail/mail-store.js';
import type { Storage } from '../../storage/index.js';
import { createInbox, findInbox } from '../../storage/pg/inboxes.js';
import { waitFor } from '../helpers/wait-for.js';
import { insertInboundCapability, openMailTestStorage, SERVER_URL } from './mail-storage.js';

interface Fixture {
  storage: Storage;
  store: MailStore;
  inboxId: string;
  boxes: Map<string, Mailbox>;
}

async function fixture(t: Test, storage?: Storage): Promise<Fixture> {
  const s = storage ?? (await openMailTestStorage(t)).storage;
  const cap = await insertInboundCapability(s.db, `${randomUUID().slice(0, 8)}.example.test`);
  const created = await createInbox(s.db, {
    capabilityId: cap,
    localpart: 'Alice',
    type: 'individual',
    passwordHash: null,
    initialPasswordSealed: null,
    now: new Date(),
  });
  if (!created) throw new Error('inbox not created');
  return {
    storage: s,
    store: s.mail.store,
    inboxId: created.inbox.id,
    boxes: new Map(created.mailboxes.map((m) => [m.name, m])),
  };
}

function box(f: Fixture, name: string): Mailbox {
  const m = f.boxes.get(name);
  if (!m) throw new Error(`no mailbox ${name}`);
  return m;
}

async function deliver(f: Fixture, mailbox: string, body: Buffer, extra: Record<string, unknown> = {}) {
  const blob = await f.storage.mail.blobs.put(body);
  try {
    return await f.store.append({
      mailboxId: box(f, mailbox).id,
      blob,
      internalDate: new Date('2025-01-02T03:04:05Z'),
      ...extra,
    });
  } finally {
    // The caller's own reference: the message holds one of its own.
    await f.storage.mail.blobs.release(blob.address);
  }
}

async function usedBytes(f: Fixture): Promise<number> {
  return (await findInbox(f.storage.db, f.inboxId))?.usedBytes ?? -1;
}

const mail = (n: number) => Buffer.from(`Message-ID: <${n}@x.test>\r\nSubject: ${n}\r\n\r\n${'x'.repeat(n)}\r\n`);

t.test('flag helpers: canonical system flags, keywords once, STORE modes', async (t) => {
  t.same(normalizeFlags(['$Junk', '\\seen', '\\FLAGGED', '$junk', 'Work']), ['\\Seen', '\\Flagged', '$Junk', 'Work']);
  t.throws(() => normalizeFlags(['\\Recent']), TypeError, '\\Recent is never stored');
  t.throws(() => normalizeFlags(['bad flag']), TypeError);
  t.same(applyFlagChange(['\\Seen'], { mode: 'add', flags: ['\\Draft', 'k'] }), ['\\Seen', '\\Draft', 'k']);
  t.same(applyFlagChange(['\\Seen', 'K'], { mode: 'remove', flags: ['k'] }), ['\\Seen']);
  t.same(applyFlagChange(['\\Seen'], { mode: 'replace', flags: [] }), []);
});

t.test('an inbox starts with five mailboxes and their RFC 6154 roles; users add folders', async (t) => {
  const f = await fixture(t);
  const list = await f.store.mailboxes(f.inboxId);
  t.same(
    list.map((m) => [m.name, m.specialUse]),
    [
      ['INBOX', null],
      ['Drafts', '\\Drafts'],
      ['Junk', '\\Junk'],
      ['Sent', '\\Sent'],
      ['Trash', '\\Trash'],
    ],
  );
  t.ok(list.every((m) => m.uidNext === 1 && m.highestModseq === 1 && m.subscribed));
  t.equal(new Set(list.map((m) => m.uidValidity)).size, 5, 'each its own UIDVALIDITY');

  const work = await f.store.createMailbox(f.inboxId, 'Work');
  t.ok(work && work.uidValidity > Math.max(...list.map((m) => m.uidValidity)), 'a later UIDVALIDITY');
  t.equal(await f.store.createMailbox(f.inboxId, 'Work'), null, 'one folder per name');
  t.equal(await f.store.createMailbox(f.inboxId, 'inbox'), null, 'INBOX in any case is the inbox');
  t.equal(await f.store.createMailbox(f.inboxId, 'Rubbish', '\\Trash'), null, 'one mailbox per role');
  await t.rejects(f.store.createMailbox(f.inboxId, ''), TypeError);

  // A deleted and re-created folder of the same name never gets an old UIDVALIDITY back.
  await f.storage.db.query('DELETE FROM mailboxes WHERE id = $1', [work?.id]);
  const again = await f.store.createMailbox(f.inboxId, 'Work');
  t.ok(again && work && again.uidValidity > work.uidValidity, 'UIDVALIDITY never reused');

  // A live localpart is unique per capability, in any case; a deleted inbox frees it.
  const [row] = await f.storage.db.query<{ capability_id: string }>('SELECT capability_id FROM inboxes WHERE id = $1', [
    f.inboxId,
  ]);
  const dup = { capabilityId: row?.capability_id ?? '', type: 'individual' as const, passwordHash: null };
  const args = { ...dup, initialPasswordSealed: null, now: new Date() };
  t.equal(await createInbox(f.storage.db, { ...args, localpart: 'ALICE' }), null, 'duplicate localpart');
  await f.storage.db.query('UPDATE inboxes SET deleted_at = now() WHERE id = $1', [f.inboxId]);
  t.ok(await createInbox(f.storage.db, { ...args, localpart: 'alice' }), 're-created after deletion');
});

t.test('append: UID and MODSEQ only grow, with the journal, used_bytes and a blob reference', async (t) => {
  const f = await fixture(t);
  const inbox = box(f, 'INBOX');
  const prefix = Buffer.from('Received: from a.test by mx.test; Thu, 2 Jan 2025 03:04:05 +0000\r\n');
  const bodies = [mail(10), mail(20), mail(10)];
  const results = [];
  for (const body of bodies) {
    results.push(
      await deliver(f, 'INBOX', body, {
        prefix,
        flags: ['\\Seen'],
        messageId: '<m@x.test>',
        envelope: { subject: 'hi', from: [{ address: 'a@a.test' }] },
        structure: [{ type: 'text/plain' }],
      }),
    );
  }
  const ok = results.map((r) => (r.kind === 'appended' ? r : null));
  t.same(
    ok.map((r) => r?.uid),
    [1, 2, 3],
    'UIDs 1, 2, 3',
  );
  t.same(
    ok.map((r) => r?.modseq),
    [2, 3, 4],
    'MODSEQs above the empty mailbox’s 1',
  );
  t.ok(ok.every((r) => r?.uidValidity === inbox.uidValidity));
  t.same(
    ok.map((r) => r?.size),
    bodies.map((b) => b.length + prefix.length),
    'size counts the prefix',
  );
  const after = await f.store.mailbox(inbox.id);
  t.equal(after?.uidNext, 4);
  t.equal(after?.highestModseq, 4);
  t.equal(
    await usedBytes(f),
    bodies.reduce((s, b) => s + b.length + prefix.length, 0),
    'used_bytes exact',
  );

  const rows = await f.store.messages(inbox.id);
  t.equal(rows.length, 3);
  const first = rows[0];
  t.ok(first?.prefix.equals(prefix), 'the prefix is kept apart');
  t.same(first?.flags, ['\\Seen']);
  t.same(first?.envelope, { subject: 'hi', from: [{ address: 'a@a.test' }] });
  t.same(first?.structure, [{ type: 'text/plain' }]);
  t.equal(first?.messageId, '<m@x.test>');
  t.same(first?.internalDate, new Date('2025-01-02T03:04:05Z'));
  const body = await f.storage.mail.blobs.get(first?.blobAddress ?? '');
  t.ok(body?.equals(bodies[0] as Buffer), 'the body is in the blob store, unchanged');
  t.equal(await f.storage.mail.blobs.refs(first?.blobAddress ?? ''), 2, 'two messages share one body');

  t.same(
    (await f.store.changesSince(inbox.id, 1)).map((c) => [c.modseq, c.uid, c.kind]),
    [
      [2, 1, 'append'],
      [3, 2, 'append'],
      [4, 3, 'append'],
    ],
  );
  t.same(
    (await f.store.messages(inbox.id, { changedSince: 3 })).map((m) => m.uid),
    [3],
  );
  t.same(
    (await f.store.messages(inbox.id, { uids: [1, 3, 99] })).map((m) => m.uid),
    [1, 3],
  );
});

t.test('20 concurrent deliveries into one inbox: 20 distinct UIDs and the exact sum of sizes', async (t) => {
  const f = await fixture(t);
  const sizes = Array.from({ length: 20 }, (_, i) => 1000 + i * 37);
  const results = await Promise.all(
    sizes.map((n, i) => deliver(f, i % 4 === 3 ? 'Junk' : 'INBOX', Buffer.concat([mail(i), randomBytes(n)]))),
  );
  const appended = results.flatMap((r) => (r.kind === 'appended' ? [r] : []));
  t.equal(appended.length, 20, 'all appended');
  const total = appended.reduce((s, r) => s + r.size, 0);
  t.equal(await usedBytes(f), total, 'used_bytes is the exact sum');
  for (const name of ['INBOX', 'Junk']) {
    const m = box(f, name);
    const mine = appended.filter((_, i) => (i % 4 === 3 ? 'Junk' : 'INBOX') === name);
    const uids = mine.map((r) => r.uid).sort((a, b) => a - b);
    t.same(
      uids,
      Array.from({ length: mine.length }, (_, i) => i + 1),
      `${name}: distinct UIDs 1..${mine.length}`,
    );
    t.equal(new Set(mine.map((r) => r.modseq)).size, mine.length, `${name}: distinct MODSEQs`);
    // In UID order, MODSEQs grow too: both come from the same locked row.
    const byUid = [...mine].sort((a, b) => a.uid - b.uid).map((r) => r.modseq);
    t.same(
      byUid,
      [...byUid].sort((a, b) => a - b),
      `${name}: MODSEQ grows with UID`,
    );
    const changes = await f.store.changesSince(m.id, 0);
    t.equal(changes.length, mine.length, `${name}: one journal row per append`);
  }
});

t.test('flags: a change bumps MODSEQ and HIGHESTMODSEQ and is journaled; a no-op is not', async (t) => {
  const f = await fixture(t);
  const inbox = box(f, 'INBOX');
  for (let i = 0; i < 3; i++) await deliver(f, 'INBOX', mail(i));
  const before = await f.store.mailbox(inbox.id);
  const res = await f.store.setFlags(inbox.id, [1, 2, 3, 9], { mode: 'add', flags: ['\\Seen', '$Work'] });
  t.equal(res.modseq, (before?.highestModseq ?? 0) + 1, 'one new modseq for the operation');
  t.same(
    res.changed,
    [1, 2, 3].map((uid) => ({ uid, flags: ['\\Seen', '$Work'] })),
  );
  t.equal((await f.store.mailbox(inbox.id))?.highestModseq, res.modseq, 'HIGHESTMODSEQ moved');
  const rows = await f.store.messages(inbox.id);
  t.ok(rows.every((r) => r.modseq === res.modseq && r.flags.join() === '\\Seen,$Work'));
  const journal = await f.store.changesSince(inbox.id, before?.highestModseq ?? 0);
  t.same(
    journal.map((c) => [c.uid, c.kind, c.flags]),
    [1, 2, 3].map((uid) => [uid, 'flags', ['\\Seen', '$Work']]),
  );

  const same = await f.store.setFlags(inbox.id, [1, 2], { mode: 'add', flags: ['\\seen'] });
  t.same(same, { modseq: null, changed: [], modified: [] }, 'nothing changed, nothing bumped');
  t.equal((await f.store.mailbox(inbox.id))?.highestModseq, res.modseq);

  // RFC 7162 §3.1.3 UNCHANGEDSINCE: message 2 changes after the client's view and is left alone.
  const seen = res.modseq ?? 0;
  const two = await f.store.setFlags(inbox.id, [2], { mode: 'add', flags: ['\\Flagged'] });
  const cond = await f.store.setFlags(
    inbox.id,
    [1, 2],
    { mode: 'remove', flags: ['\\Seen'] },
    { unchangedSince: seen },
  );
  t.same(cond.modified, [2]);
  t.same(cond.changed, [{ uid: 1, flags: ['$Work'] }]);
  t.ok((cond.modseq ?? 0) > (two.modseq ?? 0));
  await t.rejects(f.store.setFlags(inbox.id, [1], { mode: 'add', flags: ['\\Recent'] }), TypeError);
  await t.rejects(f.store.setFlags(inbox.id, [0], { mode: 'add', flags: [] }), RangeError);
});

t.test('expunge: journaled, used_bytes given back, blob released (removed at zero)', async (t) => {
  const f = await fixture(t);
  const inbox = box(f, 'INBOX');
  const shared = mail(100);
  const only = mail(200);
  await deliver(f, 'INBOX', shared);
  await deliver(f, 'INBOX', shared);
  await deliver(f, 'INBOX', only);
  const [a, , c] = await f.store.messages(inbox.id);
  const blobs = f.storage.mail.blobs;
  t.equal(await blobs.refs(a?.blobAddress ?? ''), 2);
  const used = await usedBytes(f);

  await f.store.setFlags(inbox.id, [1, 3], { mode: 'add', flags: ['\\Deleted'] });
  const before = (await f.store.mailbox(inbox.id))?.highestModseq ?? 0;
  const res = await f.store.expunge(inbox.id, [1, 2, 3], { deletedOnly: true });
  t.same(res, { modseq: before + 1, expunged: [1, 3] }, 'only the \\Deleted ones');
  t.equal(await usedBytes(f), used - (a?.size ?? 0) - (c?.size ?? 0), 'their bytes are given back');
  t.same(
    (await f.store.messages(inbox.id)).map((m) => m.uid),
    [2],
  );
  t.equal(await blobs.refs(a?.blobAddress ?? ''), 1, 'the shared body keeps one reference');
  t.notOk(await blobs.has(c?.blobAddress ?? ''), 'the other body is gone with its last message');
  t.same(
    (await f.store.changesSince(inbox.id, before)).map((x) => [x.modseq, x.uid, x.kind]),
    [
      [before + 1, 1, 'expunge'],
      [before + 1, 3, 'expunge'],
    ],
  );
  t.same(await f.store.expunge(inbox.id, [1, 3]), { modseq: null, expunged: [] }, 'nothing left to expunge');

  const rest = await f.store.expunge(inbox.id, [2]);
  t.same(rest.expunged, [2]);
  t.equal(await usedBytes(f), 0);
  t.notOk(await blobs.has(a?.blobAddress ?? ''));
  // UIDs are never handed out again.
  const next = await deliver(f, 'INBOX', only);
  t.equal(next.kind === 'appended' && next.uid, 4);
});

t.test('append refusals roll back whole: over quota, duplicate import, deleted inbox', async (t) => {
  const f = await fixture(t);
  const inbox = box(f, 'INBOX');
  const blobs = f.storage.mail.blobs;
  await f.storage.db.query('UPDATE inboxes SET storage_limit_bytes = 500 WHERE id = $1', [f.inboxId]);
  const big = mail(600);
  t.same(await deliver(f, 'INBOX', big, { enforceLimit: true }), { kind: 'over_quota' }, 'IMAP APPEND refused');
  t.equal((await f.store.mailbox(inbox.id))?.uidNext, 1, 'no UID spent');
  const again = await blobs.put(big);
  t.equal(await blobs.refs(again.address), 1, 'no reference left behind by the refusal');
  await blobs.release(again.address);
  const mx = await deliver(f, 'INBOX', big, { startBillingAt: new Date('2025-02-01T00:00:00Z') });
  t.equal(mx.kind, 'appended', 'the MX stores past the limit (docs/decisions.md #19)');
  const inboxRow = await findInbox(f.storage.db, f.inboxId);
  t.same(inboxRow?.billingStartedAt, new Date('2025-02-01T00:00:00Z'), 'billing starts with the first mail');
  await deliver(f, 'INBOX', mail(1), { startBillingAt: new Date('2025-03-01T00:00:00Z') });
  t.same((await findInbox(f.storage.db, f.inboxId))?.billingStartedAt, new Date('2025-02-01T00:00:00Z'), 'once');

  const first = await deliver(f, 'Sent', mail(5), { importKey: 'mid:<5@x.test>' });
  t.equal(first.kind, 'appended');
  const dup = await deliver(f, 'Trash', mail(5), { importKey: 'mid:<5@x.test>' });
  t.same(dup, { kind: 'duplicate' }, 'the same import key anywhere in the inbox');
  t.equal((await f.store.mailbox(box(f, 'Trash').id))?.uidNext, 1);

  await f.storage.db.query('UPDATE inboxes SET deleted_at = now() WHERE id = $1', [f.inboxId]);
  t.same(await deliver(f, 'INBOX', mail(7)), { kind: 'no_mailbox' }, 'a deleted inbox takes no mail');
  t.same(
    await f.store.append({
      mailboxId: randomUUID(),
      blob: await blobs.put(mail(8)),
      internalDate: new Date(),
    }),
    { kind: 'no_mailbox' },
  );
});

t.test('the change feed wakes subscribers of this process after each commit', async (t) => {
  const f = await fixture(t);
  const inbox = box(f, 'INBOX');
  const byMailbox: number[] = [];
  const byInbox: string[] = [];
  const stopMailbox = await f.storage.mail.changes.subscribe({ mailboxId: inbox.id }, (n) => {
    t.equal(n.inboxId, f.inboxId);
    byMailbox.push(n.modseq);
  });
  const stopInbox = await f.storage.mail.changes.subscribe({ inboxId: f.inboxId }, (n) => byInbox.push(n.mailboxId));
  const a = await deliver(f, 'INBOX', mail(1));
  await deliver(f, 'Sent', mail(2));
  const flags = await f.store.setFlags(inbox.id, [1], { mode: 'add', flags: ['\\Seen'] });
  const gone = await f.store.expunge(inbox.id, [1]);
  t.same(byMailbox, [a.kind === 'appended' && a.modseq, flags.modseq, gone.modseq], 'append, flags, expunge');
  t.same(byInbox, [inbox.id, box(f, 'Sent').id, inbox.id, inbox.id], 'an inbox subscriber hears every mailbox');
  await f.store.setFlags(inbox.id, [1], { mode: 'add', flags: ['\\Seen'] });
  t.equal(byMailbox.length, 3, 'no change, no wake-up');
  stopMailbox();
  stopInbox();
  await deliver(f, 'INBOX', mail(3));
  t.equal(byMailbox.length, 3, 'unsubscribed');
});

t.test(
  'a second Storage handle on the same Postgres is woken through LISTEN/NOTIFY and reads the shared body',
  {
    skip: SERVER_URL
      ? false
      : 'the embedded database (PGlite) lives in one process: there is no second process to wake ' +
        '(needs SVC_DATABASE_URL)',
  },
  async (t) => {
    const opened = await openMailTestStorage(t, 'postgres');
    const f = await fixture(t, opened.storage);
    const peer = await opened.openPeer();
    const inbox = box(f, 'INBOX');
    const heard: { mailboxId: string; modseq: number }[] = [];
    await peer.mail.changes.subscribe({ mailboxId: inbox.id }, (n) => heard.push(n));

    // A refused append rolls back its NOTIFY with it: the first thing the peer hears is the real append.
    await f.storage.db.query('UPDATE inboxes SET storage_limit_bytes = 10 WHERE id = $1', [f.inboxId]);
    t.same(await deliver(f, 'INBOX', mail(50), { enforceLimit: true }), { kind: 'over_quota' });
    const body = mail(60);
    const res = await deliver(f, 'INBOX', body);
    if (res.kind !== 'appended') return t.fail('not appended');
    await waitFor(() => heard.length > 0, { what: 'the peer to be woken' });
    t.same(heard[0], { inboxId: f.inboxId, mailboxId: inbox.id, modseq: res.modseq }, 'woken with mailbox and modseq');

    const [row] = await peer.mail.store.messages(inbox.id, { uids: [res.uid] });
    t.same(await peer.mail.blobs.get(row?.blobAddress ?? ''), body, 'the peer reads the body from the shared store');

    const flags = await f.store.setFlags(inbox.id, [res.uid], { mode: 'add', flags: ['\\Seen'] });
    await waitFor(() => heard.some((n) => n.modseq === flags.modseq), { what: 'the flag change to reach the peer' });
    // And the other way round, while the first handle hears its own change once, from its emitter.
    const local: number[] = [];
    await f.storage.mail.changes.subscribe({ mailboxId: inbox.id }, (n) => local.push(n.modseq));
    const fromPeer = await peer.mail.store.expunge(inbox.id, [res.uid]);
    await waitFor(() => local.includes(fromPeer.modseq ?? -1), {
      what: 'the peer’s expunge to reach the first handle',
    });
    await deliver(f, 'INBOX', mail(70));
    await waitFor(() => local.length === 2, { what: 'the local append' });
    await waitFor(() => heard.length === 4, { what: 'the peer to hear four changes' });
    t.equal(local.length, 2, 'no echo of a handle’s own notifications');
    t.equal(heard.length, 4, 'the peer heard its own expunge once, from its emitter');
  },
);

t.test('appendAll: one message into several inboxes commits all copies or none', async (t) => {
  const f = await fixture(t);
  const g = await fixture(t, f.storage);
  const gone = await fixture(t, f.storage);
  await f.storage.db.query('UPDATE inboxes SET deleted_at = now(), password_hash = NULL WHERE id = $1', [gone.inboxId]);
  const body = mail(7);
  const blob = await f.storage.mail.blobs.put(body);
  t.teardown(() => f.storage.mail.blobs.release(blob.address));
  const input = (x: Fixture) => ({ mailboxId: box(x, 'INBOX').id, blob, internalDate: new Date() });

  // A failure in the second inbox's insert (a trigger of the real database): neither copy is stored.
  await f.storage.db.query(`CREATE FUNCTION refuse_second() RETURNS trigger AS $$ BEGIN
      IF NEW.inbox_id = '${g.inboxId}' THEN RAISE EXCEPTION 'injected failure'; END IF; RETURN NEW;
    END $$ LANGUAGE plpgsql`);
  await f.storage.db.query(
    'CREATE TRIGGER refuse_second BEFORE INSERT ON mail_messages FOR EACH ROW EXECUTE FUNCTION refuse_second()',
  );
  await t.rejects(f.store.appendAll([input(f), input(g)]), /injected failure/);
  for (const x of [f, g]) t.same(await x.store.messages(box(x, 'INBOX').id), [], 'nothing stored');
  t.equal(await usedBytes(f), 0, 'no bytes counted');
  t.equal(await f.storage.mail.blobs.refs(blob.address), 1, 'only the caller holds the body');

  // Without the failure: both copies in one commit, a deleted inbox left out; UIDs start at 1 again.
  await f.storage.db.query('DROP TRIGGER refuse_second ON mail_messages');
  const out = await f.store.appendAll([input(g), input(gone), input(f)]);
  t.match(out, [{ kind: 'appended', uid: 1 }, { kind: 'no_mailbox' }, { kind: 'appended', uid: 1 }]);
  t.equal(await f.storage.mail.blobs.refs(blob.address), 3, 'one reference per stored copy, and the caller');
  t.equal(await usedBytes(f), body.length);

  // takesCallerRef: the caller's reference becomes the stored row's; when the row is not stored, or the
  // append throws, the caller keeps it.
  const own = await f.storage.mail.blobs.put(mail(8));
  const taking = (x: Fixture) => ({ ...input(x), blob: own, takesCallerRef: true });
  t.match(await f.store.appendAll([taking(gone)]), [{ kind: 'no_mailbox' }]);
  t.equal(await f.storage.mail.blobs.refs(own.address), 1, "not stored: still the caller's one reference");
  await f.storage.db.query(
    'CREATE TRIGGER refuse_second BEFORE INSERT ON mail_messages FOR EACH ROW EXECUTE FUNCTION refuse_second()',
  );
  await t.rejects(f.store.appendAll([taking(f), input(g)]), /injected failure/);
  t.equal(await f.storage.mail.blobs.refs(own.address), 1, "rolled back: still the caller's one reference");
  await f.storage.db.query('DROP TRIGGER refuse_second ON mail_messages');
  const [taken] = await f.store.appendAll([taking(f), { ...input(g), blob: own }]);
  t.equal(await f.storage.mail.blobs.refs(own.address), 2, "two rows, two references: the first one the caller's");
  await f.store.expunge(box(f, 'INBOX').id, [(taken as { uid: number }).uid]);
  t.equal(await f.storage.mail.blobs.refs(own.address), 1, 'the row that took it gives it back when expunged');
});

t.test('appendGrouped: concurrent deliveries share transactions, each answered with its own outcome', async (t) => {
  const f = await fixture(t);
  const bodies = Array.from({ length: 30 }, (_, i) => Buffer.concat([mail(i + 1), randomBytes(100 + i)]));
  const blobsIn = await Promise.all(bodies.map((b) => f.storage.mail.blobs.put(b)));
  t.teardown(() => Promise.all(blobsIn.map((b) => f.storage.mail.blobs.release(b.address))));
  const results = await Promise.all(
    blobsIn.map((blob, i) =>
      f.store.appendGrouped([
        { mailboxId: box(f, i % 3 ? 'INBOX' : 'Junk').id, blob, internalDate: new Date(), messageId: `${i}@x.test` },
      ]),
    ),
  );
  const appended = results.map(([r]) => r).flatMap((r) => (r?.kind === 'appended' ? [r] : []));
  t.equal(appended.length, 30, 'every caller got its own appended outcome');
  t.equal(
    await usedBytes(f),
    appended.reduce((s, r) => s + r.size, 0),
    'used bytes: the exact sum',
  );
  for (const name of ['INBOX', 'Junk']) {
    const rows = await f.store.messages(box(f, name).id);
    t.same(
      rows.map((r) => r.uid),
      Array.from({ length: rows.length }, (_, i) => i + 1),
      `${name}: UIDs 1..n`,
    );
    t.equal(new Set(rows.map((r) => r.modseq)).size, rows.length, `${name}: distinct MODSEQs`);
    t.equal((await f.store.changesSince(box(f, name).id, 0)).length, rows.length, `${name}: one journal row each`);
  }
  // Each outcome names its own message: the row with its UID holds the body it was given.
  for (const [i, [r]] of results.entries()) {
    const [row] = await f.store.messages(box(f, i % 3 ? 'INBOX' : 'Junk').id, { uids: [(r as { uid: number }).uid] });
    t.equal(row?.messageId, `${i}@x.test`);
  }
});
