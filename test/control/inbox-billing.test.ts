// docs/decisions.md #18 inbox billing as the organization detail reports it (`inboxUsage`, docs/api.md §2.2):
// the rule of core/inbox-billing.ts over the organization's inboxes read from storage, on a frozen clock.
// Billing starts are set through storage (the MX and the login start them; here no mail is sent).
import t from 'tap';
import { testClock } from '../helpers/clock.js';
import { at, inboxEnv, inboxes, inboundCapability, tenant } from './inbox-fixture.js';

const GB = 2 ** 30;

t.test('organization detail: inboxUsage from the inboxes of every project of the organization', async (t) => {
  const clock = testClock();
  clock.freeze(Date.parse('2031-06-20T09:00:00Z'));
  const e = await inboxEnv(t, { clock });
  const r = inboxes(e);
  const db = e.svc.running.storage.db;
  const startBilling = (id: string, iso: string) =>
    db.query('UPDATE inboxes SET billing_started_at = $2 WHERE id = $1', [id, new Date(iso)]);
  const usage = async () => (await e.owner.client.console.organizations.get({ id: e.owner.organizationId })).inboxUsage;

  t.same(await usage(), {
    activeInboxes: 0,
    billedCents: 0,
    storageOverageGb: 0,
    storageBilledCents: 0,
    totalBilledCents: 0,
    monthStart: '2031-06-01',
  });

  // Deleted last month: nothing this month.
  const june = await r.create({ ...at(e), localpart: 'june' });
  await startBilling(june.inbox.id, '2031-06-02T00:00:00Z');
  await r.delete({ ...at(e), inboxId: june.inbox.id });
  t.match(await usage(), { activeInboxes: 0, billedCents: 63 }, 'June: 19 days of the deleted inbox, 63 cents');

  clock.freeze(Date.parse('2031-07-16T12:00:00Z'));
  const used = await r.create({ ...at(e), localpart: 'used' });
  await startBilling(used.inbox.id, '2031-06-10T08:00:00Z');
  const unused = await r.create({ ...at(e), localpart: 'unused' });
  await r.storage({ ...at(e), inboxId: unused.inbox.id, limitGb: 3 });
  const gone = await r.create({ ...at(e), localpart: 'gone' });
  await startBilling(gone.inbox.id, '2031-07-10T23:00:00Z');
  await r.delete({ ...at(e), inboxId: gone.inbox.id });
  // Another project of the organization counts too; another organization does not.
  const { project } = await e.owner.client.console.projects.create({
    name: 'second',
    organizationId: e.owner.organizationId,
  });
  const second = await inboundCapability(e, { ...e.owner, projectId: project.id });
  const other = await r.create({ id: project.id, capId: second.capId, localpart: 'x' });
  await startBilling(other.inbox.id, '2031-07-16T11:00:00Z');
  const stranger = await tenant(e.svc, 'Stranger');
  const theirs = await inboundCapability(e, stranger);
  const foreign = await inboxes(e, stranger).create({ id: stranger.projectId, capId: theirs.capId, localpart: 'y' });
  await startBilling(foreign.inbox.id, '2031-07-01T00:00:00Z');
  await inboxes(e, stranger).storage({
    id: stranger.projectId,
    capId: theirs.capId,
    inboxId: foreign.inbox.id,
    limitGb: 9,
  });

  t.same(
    await usage(),
    {
      // used (16 days: 53) and other (1 day: 3); gone was deleted, unused never started.
      activeInboxes: 2,
      // used 53 + gone 7 days (July 10 to 16) 23 + other 3; unused is free.
      billedCents: 53 + 23 + 3,
      storageOverageGb: 2,
      storageBilledCents: 100,
      totalBilledCents: 53 + 23 + 3 + 100,
      monthStart: '2031-07-01',
    },
    'July 16',
  );
  t.equal((await inboxes(e).list(at(e))).inboxes.find((i) => i.id === unused.inbox.id)!.storageLimitBytes, 3 * GB);

  // A deleted inbox's reserved storage is no longer billed; its billed days are.
  await r.delete({ ...at(e), inboxId: unused.inbox.id });
  t.match(await usage(), { storageOverageGb: 0, storageBilledCents: 0, billedCents: 79, totalBilledCents: 79 });
});
