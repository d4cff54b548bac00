// Issue 16 end to end: a sendEmail with Reply-To, extra headers, attachments (binary, an inline cid: image,
// a non-ASCII file name), tags and metadata → the MTA (loopback DNS zone) → an SMTP sink. What arrived is
// parsed by Python's `email` package and its two DKIM signatures verified by python3-dkim; the delivered
// event's webhook carries the tags and metadata.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { startWebhookReceiver } from '../helpers/webhook-receiver.js';
import { sender } from '../helpers/sender.js';
import { verifyDkimAll } from '../helpers/dkim-verify.js';
import { parseWithPython } from '../helpers/python-email.js';

t.test('attachments, inline image, extra headers: delivered intact, DKIM valid, tags in the webhook', async (t) => {
  const { zone, sink, svc } = await deliveryWorld(t, {
    env: { SVC_ALLOW_PRIVATE_WEBHOOKS: '1' },
    webhooks: { pollMs: 20 },
  });
  const s = await sender(svc, { ed25519: true });
  for (const [host, value] of Object.entries(s.dkimTxt)) zone.txt(host, value);
  const hook = await startWebhookReceiver(t);
  hook.secret = (await s.owner.client.console.projects.webhooks.create({ id: s.projectId, url: hook.url() })).secret;

  const binary = randomBytes(100_000);
  const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), randomBytes(5_000)]);
  const tags = [
    { name: 'category', value: 'invoice' },
    { name: 'tenant', value: 't-42' },
  ];
  const metadata = { invoice: 'INV-2026-001', customer: 'Zoë' };
  const rich = await s.key.v1.services.sendEmail({
    from: `Billing <billing@${s.domain}>`,
    to: 'payer@dest.test',
    subject: 'Your invoice',
    text: 'Attached.',
    html: '<p><img src="cid:logo"> Your invoice is attached.</p>',
    replyTo: 'Accounts Receivable <ar@example.com>',
    headers: { 'X-Invoice': 'INV-2026-001', 'X-Entity-Ref-ID': 'e-1', 'X-Hinweis': 'Rechnung für März' },
    attachments: [
      { filename: 'invoice.bin', content: binary.toString('base64') },
      { filename: 'logo.png', content: png.toString('base64'), contentId: 'logo' },
      { filename: 'Überweisung März.pdf', content: Buffer.from('%PDF-1.7 fake').toString('base64') },
    ],
    tags,
    metadata,
  });
  const plain = await s.key.v1.services.sendEmail({
    from: `billing@${s.domain}`,
    to: 'other@dest.test',
    subject: 'Plain',
    text: 'x',
  });

  const [a, b] = await sink.waitForMessages(2);
  const got = [a!, b!].find((m) => m.rcptTo[0] === 'payer@dest.test')!;
  const m = await parseWithPython(got.raw);
  t.same(m.defects, [], 'Python finds no defect');
  t.same(m.headers['reply-to'], ['Accounts Receivable <ar@example.com>']);
  t.same(m.headers['x-invoice'], ['INV-2026-001'], 'extra headers arrive');
  t.same(m.headers['x-entity-ref-id'], ['e-1']);
  t.same(m.headers['x-hinweis'], ['Rechnung für März'], 'a non-ASCII value, RFC 2047');
  const part = (name: string) => m.parts.find((p) => p.filename === name);
  t.ok(part('invoice.bin')?.content.equals(binary), '100 kB of random bytes unchanged');
  t.ok(part('logo.png')?.content.equals(png), 'the inline image unchanged');
  t.equal(part('logo.png')?.contentId, '<logo>');
  t.equal(part('logo.png')?.disposition, 'inline');
  t.ok(part('logo.png')?.path.includes('multipart/related'), 'in the multipart/related of the html');
  t.equal(part('Überweisung März.pdf')?.contentType, 'application/pdf', 'the non-ASCII file name, decoded');

  const results = await verifyDkimAll(
    sink.messages.map((x) => x.raw),
    s.dkimTxt,
  );
  t.same(
    results.map((sigs) => sigs.map((x) => `${x.algorithm} ${x.ok ? 'pass' : x.error}`).sort()),
    [0, 1].map(() => ['ed25519-sha256 pass', 'rsa-sha256 pass']),
    'python3-dkim: both signatures of both messages pass',
  );

  const delivered = await hook.waitFor(2);
  const of = (id: string) => delivered.find((h) => h.json.data.messageId === id);
  t.equal(of(rich.providerMessageId)?.json.type, 'delivered');
  t.ok(of(rich.providerMessageId)?.signatureValid, 'signed');
  t.same(of(rich.providerMessageId)?.json.data.tags, tags, 'the webhook carries the tags');
  t.same(of(rich.providerMessageId)?.json.data.metadata, metadata, 'and the metadata');
  t.same(
    [of(plain.providerMessageId)?.json.data.tags, of(plain.providerMessageId)?.json.data.metadata],
    [[], {}],
    'a message sent without: [] and {}',
  );
});
