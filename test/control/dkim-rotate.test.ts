// DKIM key rotation (docs/api.md §4.5, issue 19 item 5) end to end: the service with its MTA, a loopback DNS
// zone and an SMTP sink. Mail is signed by the old selector until verify finds the new record, then by the
// new one; python3-dkim (python3-nacl for Ed25519) verifies both against what the zone publishes. The old
// selector is listed as retired for a week of the service's clock.
import t from 'tap';
import type { Client } from '@svc-mail/sdk';
import { deliveryWorld, type DeliveryWorld } from '../helpers/delivery-world.js';
import { sender, type Sender } from '../helpers/sender.js';
import { verifyDkim, type DkimSignatureResult } from '../helpers/dkim-verify.js';
import { errorOf } from '../helpers/errors.js';
import { KEY_CHECK_MS } from '../../mta/outbound/signing-keys.js';

const DAY = 24 * 60 * 60_000;

/** Sends one message and returns its DKIM signatures as python3-dkim finds them against `txt`. */
async function sendAndVerify(
  { sink }: DeliveryWorld,
  s: Sender,
  subject: string,
  txt: Record<string, string>,
): Promise<DkimSignatureResult[]> {
  const before = sink.messages.length;
  await s.key.v1.services.sendEmail({ from: `news@${s.domain}`, to: 'reader@dest.test', subject, text: subject });
  const got = await sink.waitForMessages(before + 1);
  const raw = got[before]!.raw;
  if (!raw.toString().includes(`Subject: ${subject}`)) throw new Error(`expected ${subject} to arrive next`);
  return (await verifyDkim(raw, txt)).signatures;
}

const summary = (sigs: DkimSignatureResult[]) =>
  sigs.map((x) => `${x.algorithm} ${x.selector} ${x.ok ? 'pass' : x.error}`);

const capOf = async (s: Sender) => {
  const { domains } = await s.owner.client.console.projects.domains.list({ id: s.projectId });
  return domains.flatMap((d) => d.outbound).find((o) => o.id === s.outboundId)!;
};

for (const algorithm of ['rsa-sha256', 'ed25519-sha256'] as const) {
  t.test(`rotating the ${algorithm} key: old signs until verify, then the new; the old listed a week`, async (t) => {
    const env = await deliveryWorld(t);
    const { svc, zone } = env;
    const ed = algorithm === 'ed25519-sha256';
    const s = await sender(svc, { ed25519: ed });
    for (const [host, value] of Object.entries(s.dkimTxt)) zone.txt(host, value);
    const p = s.owner.client.console.projects;
    const before = await capOf(s);
    const old = ed ? before.dkim.ed25519Selector! : before.dkim.selector;
    t.equal(before.dkim.selector, before.selector, 'dkim.selector is the capability selector');
    t.same(before.dkim.retired, [], 'nothing retired yet');
    t.notOk(before.dkim.pending, 'nothing pending');

    const expected = (selector: string) => [
      ...(ed ? [`rsa-sha256 ${before.selector} pass`] : []),
      `${algorithm} ${selector} pass`,
    ];
    t.same(
      summary(await sendAndVerify(env, s, 'before', s.dkimTxt)).sort(),
      expected(old).sort(),
      'before: signed by the old selector, verified',
    );

    // A first rotation, replaced by a second one while pending.
    const first = await p.outbound.dkim.rotate({ id: s.projectId, capId: s.outboundId, algorithm });
    const second = await p.outbound.dkim.rotate({ id: s.projectId, capId: s.outboundId, algorithm });
    t.not(first.pending.selector, second.pending.selector, 'a second rotate mints another key');
    const sel = second.pending.selector;
    t.not(sel, old, 'a new selector');
    t.equal(second.pending.algorithm, algorithm);
    t.match(second.pending.record, {
      host: `${sel}._domainkey.${s.domain}`,
      type: 'TXT',
      value: new RegExp(`^v=DKIM1; k=${ed ? 'ed25519' : 'rsa'}; p=[A-Za-z0-9+/=]+$`),
    });
    t.same(second.outbound.dkim.pending, second.pending, 'the capability in the answer shows it pending');
    t.notMatch(JSON.stringify(second), /PRIVATE KEY/, 'no private key in the answer');
    const rows = await svc.running.storage.db.query<{ sealed: string }>(
      'SELECT pending_dkim_private_sealed AS sealed FROM outbound_capabilities WHERE id = $1',
      [s.outboundId],
    );
    t.notMatch(rows[0]!.sealed, /PRIVATE KEY/, 'the pending private key is sealed at rest');
    const pending = await capOf(s);
    t.equal(pending.dkim.pending?.selector, sel, 'the read shows the latest pending key');
    t.equal(ed ? pending.dkim.ed25519Selector : pending.dkim.selector, old, 'the old key still current');

    // The first key's record is not enough: the second replaced it.
    zone.txt(first.pending.record.host, first.pending.record.value);
    t.match(
      await errorOf(p.outbound.verify({ id: s.projectId, capId: s.outboundId })),
      { status: 400, code: 'invalid_request', details: { host: second.pending.record.host } },
      'verify before the new record is published: 400 naming it',
    );
    svc.clock.advance(KEY_CHECK_MS);
    t.same(
      summary(await sendAndVerify(env, s, 'rotated', s.dkimTxt)).sort(),
      expected(old).sort(),
      'rotated, not verified: still the old selector',
    );

    zone.txt(second.pending.record.host, second.pending.record.value);
    const verifiedAt = new Date(svc.clock.now());
    const v = await p.outbound.verify({ id: s.projectId, capId: s.outboundId });
    t.equal(v.status, 'verified');
    t.equal(ed ? v.outbound.dkim.ed25519Selector : v.outbound.selector, sel, 'promoted');
    t.notOk(v.outbound.dkim.pending, 'nothing pending after');
    t.equal((ed ? v.outbound.dnsRecords.dkimEd25519 : v.outbound.dnsRecords.dkim)?.value, second.pending.record.value);
    t.equal(v.outbound.dkim.retired.length, 1, 'the old selector listed as retired');
    const retired = v.outbound.dkim.retired[0]!;
    t.match(retired, { selector: old, algorithm });
    t.ok(Math.abs(Date.parse(retired.retiredAt) - verifiedAt.getTime()) < 60_000, 'retired now');
    t.equal(Date.parse(retired.until) - Date.parse(retired.retiredAt), 7 * DAY, 'until a week later');

    // The MTA (whose key cache checks the row's version at most every KEY_CHECK_MS) now signs with the new key.
    svc.clock.advance(KEY_CHECK_MS);
    const published = { ...s.dkimTxt, [second.pending.record.host]: second.pending.record.value };
    t.same(
      summary(await sendAndVerify(env, s, 'promoted', published)).sort(),
      expected(sel).sort(),
      'after verify: signed by the new selector, verified',
    );

    svc.clock.advance(6 * DAY);
    t.equal((await capOf(s)).dkim.retired.length, 1, 'six days on: still listed');
    svc.clock.advance(2 * DAY);
    t.same((await capOf(s)).dkim.retired, [], 'eight days on: no longer listed');
  });
}

t.test('an Ed25519 rotation adds the second signature to an RSA-only capability', async (t) => {
  const env = await deliveryWorld(t);
  const s = await sender(env.svc);
  for (const [host, value] of Object.entries(s.dkimTxt)) env.zone.txt(host, value);
  const p = s.owner.client.console.projects;
  const before = await capOf(s);
  const domainId = (await p.domains.list({ id: s.projectId })).domains[0]!.id;
  const r = await p.domains.outbound.dkim.rotate({
    id: s.projectId,
    domainId,
    capId: s.outboundId,
    algorithm: 'ed25519-sha256',
  });
  env.zone.txt(r.pending.record.host, r.pending.record.value);
  const v = await p.outbound.verify({ id: s.projectId, capId: s.outboundId });
  t.equal(v.outbound.dkim.ed25519Selector, r.pending.selector, 'the nested alias rotated; verify promoted it');
  t.same(v.outbound.dkim.retired, [], 'nothing was replaced');
  t.equal(v.outbound.selector, before.selector, 'the RSA key unchanged');
  env.svc.clock.advance(KEY_CHECK_MS);
  const sigs = await sendAndVerify(env, s, 'both', { ...s.dkimTxt, [r.pending.record.host]: r.pending.record.value });
  t.same(summary(sigs).sort(), [`ed25519-sha256 ${r.pending.selector} pass`, `rsa-sha256 ${v.outbound.selector} pass`]);
});

t.test('rotate: non-members 404, read-only members and keys without project:admin 403, bad bodies 400', async (t) => {
  const { svc } = await deliveryWorld(t);
  const s = await sender(svc);
  const rotate = (cl: Client, body: Record<string, unknown> = {}) =>
    cl.console.projects.outbound.dkim.rotate({ id: s.projectId, capId: s.outboundId, ...body });

  const outsider = await svc.signup();
  t.match(await errorOf(rotate(outsider.client)), { status: 404 }, 'non-member: 404');
  const { code } = await s.owner.client.console.organizations.joinCodes.create({ id: s.orgId, role: 'auditor' });
  const auditor = await svc.signup();
  await auditor.client.console.organizations.join({ code });
  t.ok(await auditor.client.console.projects.domains.list({ id: s.projectId }), 'the auditor reads the domains');
  t.match(await errorOf(rotate(auditor.client)), { status: 403, code: 'forbidden' }, 'auditor: 403');
  t.match(await errorOf(rotate(s.key)), { status: 403, code: 'forbidden' }, 'a sending key: 403');
  t.match(
    await errorOf(rotate(s.owner.client, { capId: '00000000-0000-4000-8000-000000000000' })),
    { status: 404 },
    'no such capability: 404',
  );
  t.match(
    await errorOf(rotate(s.owner.client, { algorithm: 'rsa-sha1' })),
    { status: 400, code: 'invalid_request', details: [{ field: 'body.algorithm' }] },
    'unknown algorithm: 400',
  );
  t.match(
    await errorOf(rotate(s.owner.client, { bits: 4096 })),
    { status: 400, code: 'invalid_request', details: [{ field: 'body.bits' }] },
    'unknown field: 400',
  );
  t.notOk((await capOf(s)).dkim.pending, 'nothing was minted by the refused calls');
  const ok = await rotate(s.owner.client);
  t.equal(ok.pending.algorithm, 'rsa-sha256', 'the default: the RSA key');
});
