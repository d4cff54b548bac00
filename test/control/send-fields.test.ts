// docs/api.md §4.11 sendEmail's extra fields (issue 16): replyTo, headers, attachments, tags, metadata. Every
// refusal is a 400 naming its field and queues nothing; an accepted message is read back from the spool by
// Python's `email` package; tags and metadata come back from the message read, the project's list (filtered
// by ?tag=name:value), the admin list and the data layer's list. The test-message routes take the same body.
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';
import { parseWithPython } from '../helpers/python-email.js';

const b64 = (s: string | Buffer) => Buffer.from(s).toString('base64');
type Detail = { field: string; message: string };
/** The fields a refusal names, each once (a union the schema refuses names its field once per branch). */
const fieldsOf = (err: { details?: unknown }) => [...new Set(((err.details ?? []) as Detail[]).map((d) => d.field))];

t.test('every refusal is a 400 naming its field, and queues nothing', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const base = { from: `ada@${s.domain}`, to: 'bob@example.com', subject: 'Hi', text: 'x' };
  // The fields the 400 names, exactly; `extra` is merged into a valid body.
  const cases: [string, Record<string, unknown>, string[]][] = [
    ['replyTo not an address', { replyTo: 'nobody' }, ['body.replyTo']],
    ['replyTo: the bad one of a list', { replyTo: ['a@example.com', 'Bob <bob@>'] }, ['body.replyTo[1]']],
    ['replyTo with a line break', { replyTo: 'a@example.com\r\nBcc: x@example.com' }, ['body.replyTo']],
    ['replyTo: an empty list', { replyTo: [] }, ['body.replyTo']],
    ['replyTo: 51 addresses', { replyTo: Array.from({ length: 51 }, (_, i) => `r${i}@example.com`) }, ['body.replyTo']],
    ['header name with a space', { headers: { 'X Bad': 'v' } }, ['body.headers.X Bad']],
    ['header name with a colon', { headers: { 'X-Bad:': 'v' } }, ['body.headers.X-Bad:']],
    ['header name not ASCII', { headers: { 'X-Grüße': 'v' } }, ['body.headers.X-Grüße']],
    [
      'header name of 77 characters',
      { headers: { ['X-' + 'a'.repeat(75)]: 'v' } },
      ['body.headers.X-' + 'a'.repeat(75)],
    ],
    ['header value with CRLF', { headers: { 'X-A': 'a\r\nBcc: evil@example.com' } }, ['body.headers.X-A']],
    ['header value with a bare LF', { headers: { 'X-A': 'a\nb' } }, ['body.headers.X-A']],
    ['header value with NUL', { headers: { 'X-A': 'a\0b' } }, ['body.headers.X-A']],
    ['header value with a control character', { headers: { 'X-A': 'a\x07b' } }, ['body.headers.X-A']],
    ['header value empty', { headers: { 'X-A': ' ' } }, ['body.headers.X-A']],
    ['header value not a string', { headers: { 'X-A': 1 } }, ['body.headers.X-A']],
    ['header value with a 900-character word', { headers: { 'X-A': 'a'.repeat(900) } }, ['body.headers.X-A']],
    ['header given twice, cases differing', { headers: { 'X-A': '1', 'x-a': '2' } }, ['body.headers.x-a']],
    [
      '51 headers',
      { headers: Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`X-H${i}`, 'v'])) },
      ['body.headers'],
    ],
    ['headers over 8 KB', { headers: { 'X-A': 'a '.repeat(2100), 'X-B': 'b '.repeat(2100) } }, ['body.headers']],
    [
      'attachment content not base64',
      { attachments: [{ filename: 'a.txt', content: 'not base64!' }] },
      ['body.attachments[0].content'],
    ],
    [
      'attachment content unpadded',
      { attachments: [{ filename: 'a.txt', content: 'YWJjZA' }] },
      ['body.attachments[0].content'],
    ],
    [
      'attachment content with a line break',
      { attachments: [{ filename: 'a.txt', content: 'YWJj\r\nZGVm' }] },
      ['body.attachments[0].content'],
    ],
    [
      'attachment content base64url',
      {
        attachments: [
          {
            filename: 'a.bin',
            content: b64(Buffer.from([0xfb, 0xff]))
              .replace('+', '-')
              .replace('/', '_'),
          },
        ],
      },
      ['body.attachments[0].content'],
    ],
    [
      'attachment content type with a parameter',
      { attachments: [{ filename: 'a.txt', content: b64('a'), contentType: 'text/plain; charset=utf-8' }] },
      ['body.attachments[0].contentType'],
    ],
    [
      'attachment content type multipart',
      { attachments: [{ filename: 'a', content: b64('a'), contentType: 'multipart/mixed' }] },
      ['body.attachments[0].contentType'],
    ],
    [
      'attachment content id in brackets',
      { attachments: [{ filename: 'a.png', content: b64('a'), contentId: '<logo>' }] },
      ['body.attachments[0].contentId'],
    ],
    [
      'attachment content id given twice',
      {
        attachments: [
          { filename: 'a.png', content: b64('a'), contentId: 'logo' },
          { filename: 'b.png', content: b64('b'), contentId: 'logo' },
        ],
      },
      ['body.attachments[1].contentId'],
    ],
    [
      'attachment file name with a line break',
      { attachments: [{ filename: 'a\r\n.txt', content: b64('a') }] },
      ['body.attachments[0].filename'],
    ],
    ['attachment without a file name', { attachments: [{ content: b64('a') }] }, ['body.attachments[0].filename']],
    [
      'attachment with an unknown field',
      { attachments: [{ filename: 'a', content: b64('a'), path: '/etc/passwd' }] },
      ['body.attachments[0].path'],
    ],
    ['tag name with a space', { tags: [{ name: 'a b', value: 'x' }] }, ['body.tags[0].name']],
    ['tag value of 257 characters', { tags: [{ name: 'a', value: 'v'.repeat(257) }] }, ['body.tags[0].value']],
    ['tag value empty', { tags: [{ name: 'a', value: '' }] }, ['body.tags[0].value']],
    [
      'tag name given twice',
      {
        tags: [
          { name: 'a', value: '1' },
          { name: 'a', value: '2' },
        ],
      },
      ['body.tags[1].name'],
    ],
    ['11 tags', { tags: Array.from({ length: 11 }, (_, i) => ({ name: `t${i}`, value: 'v' })) }, ['body.tags']],
    ['tag with an unknown field', { tags: [{ name: 'a', value: 'b', color: 'red' }] }, ['body.tags[0].color']],
    ['metadata value not a string', { metadata: { orderId: 42 } }, ['body.metadata.orderId']],
    ['metadata over 2 KB as JSON', { metadata: { a: 'x'.repeat(1000), b: 'y'.repeat(1040) } }, ['body.metadata']],
    ['metadata with NUL', { metadata: { a: 'x\0y' } }, ['body.metadata.a']],
  ];
  for (const name of [
    'From',
    'sender',
    'TO',
    'Cc',
    'bcc',
    'Subject',
    'Date',
    'Message-ID',
    'MIME-Version',
    'Content-Type',
    'content-transfer-encoding',
    'Content-Disposition',
    'Content-ID',
    'DKIM-Signature',
    'Return-Path',
    'Received',
    'List-Unsubscribe',
    'list-unsubscribe-post',
    'Reply-To',
    'Feedback-ID',
  ]) {
    cases.push([`reserved header ${name}`, { headers: { 'X-Fine': 'ok', [name]: 'x' } }, [`body.headers.${name}`]]);
  }
  for (const [what, extra, fields] of cases) {
    const err = await errorOf(s.key.v1.services.sendEmail({ ...base, ...extra } as never));
    t.equal(err.status, 400, `${what}: 400`);
    t.equal(err.code, 'invalid_request', `${what}: invalid_request`);
    t.same(fieldsOf(err), fields, `${what}: names ${fields.join(', ')}`);
  }
  const reserved = await errorOf(
    s.key.v1.services.sendEmail({ ...base, headers: { 'DKIM-Signature': 'v=1' } } as never),
  );
  t.match((reserved.details as Detail[])[0]?.message, /set by the service/, 'a reserved field is named as such');

  // The test-message routes take the same body, with the same refusals.
  const viaConsole = await errorOf(
    s.owner.client.console.projects.testMessage({ id: s.projectId, ...base, headers: { Received: 'x' } } as never),
  );
  t.same([viaConsole.status, fieldsOf(viaConsole)], [400, ['body.headers.Received']], 'console test-message');
  const viaAdmin = await errorOf(
    svc.admin().admin.testMessage({ projectId: s.projectId, ...base, tags: [{ name: 'a b', value: 'c' }] } as never),
  );
  t.same([viaAdmin.status, fieldsOf(viaAdmin)], [400, ['body.tags[0].name']], 'admin test-message');

  const n = await svc.running.storage.db.query<{ n: number }>('SELECT count(*)::int AS n FROM messages');
  t.equal(n[0]?.n, 0, 'nothing was queued');
  t.equal([...svc.running.storage.spool.entries()].length, 0, 'nothing was spooled');
});

t.test('the whole request is within the 10 MB body limit', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const big = randomBytes(8 * 1024 * 1024);
  const err = await errorOf(
    s.key.v1.services.sendEmail({
      from: `ada@${s.domain}`,
      to: 'bob@example.com',
      subject: 'big',
      text: 'x',
      attachments: [{ filename: 'big.bin', content: big.toString('base64') }],
    }),
  );
  t.equal(err.status, 413, '8 MB of bytes is over 10 MB of base64: 413');
  t.equal(err.code, 'payload_too_large');

  const fits = randomBytes(7 * 1024 * 1024);
  const ok = await s.key.v1.services.sendEmail({
    from: `ada@${s.domain}`,
    to: 'bob@example.com',
    subject: 'big',
    text: 'x',
    attachments: [{ filename: 'fits.bin', content: fits.toString('base64') }],
  });
  t.equal(ok.status, 'queued', '7 MB of bytes fits');
  const m = await parseWithPython(svc.running.storage.spool.body(ok.providerMessageId)!);
  t.ok(m.parts.find((p) => p.filename === 'fits.bin')?.content.equals(fits), 'spooled whole');
});

t.test('an accepted message: Reply-To, extra headers, attachments, as Python reads them', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const binary = Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 7 + (i >> 8)) & 0xff)); // every octet
  const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), randomBytes(200)]);
  const res = await s.key.v1.services.sendEmail({
    from: `Ada <ada@${s.domain}>`,
    to: 'bob@example.com',
    subject: 'With files',
    text: 'See attached',
    html: '<p>Logo: <img src="cid:logo@acme"></p>',
    replyTo: ['Support Désk <support@example.com>', 'help@example.org'],
    headers: {
      'X-Campaign': 'spring-2026',
      'X-Note': 'Grüße aus Köln',
      'In-Reply-To': '<earlier@example.com>',
    },
    attachments: [
      { filename: 'data.bin', content: binary.toString('base64') },
      { filename: 'logo.png', content: png.toString('base64'), contentId: 'logo@acme' },
      { filename: 'Résumé – été.pdf', content: b64('%PDF-1.4 fake') },
      { filename: 'notes', content: b64('plain words'), contentType: 'Text/Plain' },
      { filename: 'fwd.eml', content: b64('From: a@b\r\n\r\nhi\r\n') },
    ],
  });
  t.equal(res.status, 'queued');
  const raw = svc.running.storage.spool.body(res.providerMessageId)!;
  const m = await parseWithPython(raw);
  t.same(m.defects, [], 'Python finds no defect');
  t.same(m.headers['reply-to'], ['Support Désk <support@example.com>, help@example.org'], 'Reply-To, both');
  t.same(m.headers['x-campaign'], ['spring-2026'], 'an extra header as given');
  t.same(m.headers['x-note'], ['Grüße aus Köln'], 'a non-ASCII value, decoded');
  t.match(m.rawHeaders['x-note']?.[0], /^=\?UTF-8\?[QB]\?/i, '... sent as RFC 2047 encoded words');
  t.same(m.headers['in-reply-to'], ['<earlier@example.com>']);
  t.equal(m.contentType, 'multipart/mixed');

  const byName = Object.fromEntries(m.parts.map((p) => [p.filename ?? p.contentType, p]));
  t.ok(byName['data.bin']?.content.equals(binary), 'binary bytes unchanged');
  t.equal(byName['data.bin']?.contentType, 'application/octet-stream', 'an unknown extension: octet-stream');
  t.equal(byName['data.bin']?.disposition, 'attachment');

  const logo = byName['logo.png'];
  t.ok(logo?.content.equals(png), 'the inline image unchanged');
  t.equal(logo?.contentType, 'image/png', 'content type guessed from .png');
  t.equal(logo?.disposition, 'inline');
  t.equal(logo?.contentId, '<logo@acme>', 'Content-ID');
  // RFC 2046 §5.1.4 / RFC 2387: mixed ( alternative ( text, related ( html, image ) ), attachments ).
  t.same(logo?.path, ['multipart/mixed', 'multipart/alternative', 'multipart/related'], 'beside the html, related');
  const html = m.parts.find((p) => p.contentType === 'text/html');
  t.same(html?.path, ['multipart/mixed', 'multipart/alternative', 'multipart/related'], 'the html, same related');
  t.match(html?.content.toString(), /src="cid:logo@acme"/);

  const pdf = byName['Résumé – été.pdf'];
  t.ok(pdf, 'a non-ASCII file name, decoded');
  t.equal(pdf?.contentType, 'application/pdf', 'guessed from .pdf');
  t.match(raw.toString('latin1'), /filename\*0?\*=utf-8''R%C3%A9sum%C3%A9/i, 'file name per RFC 2231');
  t.equal(byName['notes']?.contentType, 'text/plain', 'a given content type');
  t.equal(byName['notes']?.content.toString(), 'plain words');
  t.equal(byName['fwd.eml']?.contentType, 'application/octet-stream', 'a guessed message/* is sent as bytes');
  t.equal(m.parts.find((p) => p.contentType === 'text/plain' && !p.filename)?.content.toString(), 'See attached');
});

t.test('tags and metadata: stored, read, listed and filtered', async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const send = async (extra: Record<string, unknown>) =>
    (
      await s.key.v1.services.sendEmail({
        from: `ada@${s.domain}`,
        to: 'bob@example.com',
        subject: 's',
        text: 'x',
        ...extra,
      })
    ).providerMessageId;
  const welcome = await send({
    tags: [
      { name: 'category', value: 'welcome' },
      { name: 'tier', value: 'gold_1' },
    ],
    metadata: { orderId: 'A-17', 'user id': 'ü 42' },
  });
  const reset = await send({ tags: [{ name: 'category', value: 'password-reset' }] });
  const plain = await send({});
  const viaConsole = (
    await s.owner.client.console.projects.testMessage({
      id: s.projectId,
      from: `ada@${s.domain}`,
      to: 'bob@example.com',
      subject: 't',
      text: 'x',
      tags: [{ name: 'category', value: 'welcome' }],
      metadata: { via: 'console' },
    })
  ).providerMessageId;

  const row = (await s.key.v1.messages.get({ id: welcome })).row;
  t.same(row.tags, [
    { name: 'category', value: 'welcome' },
    { name: 'tier', value: 'gold_1' },
  ]);
  t.same(row.metadata, { orderId: 'A-17', 'user id': 'ü 42' });
  const bare = (await s.key.v1.messages.get({ id: plain })).row;
  t.same([bare.tags, bare.metadata], [[], {}], 'a message sent without: [] and {}');
  t.same((await s.key.v1.messages.get({ id: reset })).row.metadata, {}, 'tags without metadata');

  const list = async (tag?: string) =>
    (await s.owner.client.console.projects.messages({ id: s.projectId, ...(tag ? { tag } : {}) })).messages.map(
      (m) => m.id,
    );
  t.same(await list('category:welcome'), [viaConsole, welcome], 'filtered by one tag, newest first');
  t.same(await list('tier:gold_1'), [welcome]);
  t.same(await list('category:password-reset'), [reset]);
  t.same(await list('category:nothing'), [], 'no message has it');
  t.same(await list('welcome:category'), [], 'name and value are not swapped');
  t.equal((await list()).length, 4, 'unfiltered: all four');
  const listed = (await s.owner.client.console.projects.messages({ id: s.projectId })).messages;
  t.same(
    listed.find((m) => m.id === viaConsole)?.metadata,
    { via: 'console' },
    'the list carries metadata; the test message stored it',
  );
  for (const bad of ['category', 'category:', ':welcome', 'a b:c', 'a:b:c']) {
    const err = await errorOf(s.owner.client.console.projects.messages({ id: s.projectId, tag: bad }));
    t.same([err.status, fieldsOf(err)], [400, ['query.tag']], `tag=${bad} refused`);
  }

  const admin = await svc.admin().admin.messages.list({ projectId: s.projectId, tag: 'category:password-reset' });
  t.same(
    admin.messages.map((m) => [m.id, m.tags]),
    [[reset, [{ name: 'category', value: 'password-reset' }]]],
    'the admin list filters too',
  );
  const dl = await s.key.v1.messages.list({});
  t.same(
    dl.rows.find((r) => r.id === welcome)?.metadata,
    { orderId: 'A-17', 'user id': 'ü 42' },
    'the data layer row, the same',
  );
  t.same(dl.rows.find((r) => r.id === plain)?.tags, []);
});
