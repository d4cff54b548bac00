// docs/api.md §4.13 templates and §4.11 templateId/variables (issue 6 items 6-8): CRUD with owner-only
// writes and member reads, public templates, the cross-tenant 404s, rendering (escaping, missing
// variables, prototype names, the output bound), versions, and sendEmail rendering into the spool.
import t from 'tap';
import { renderTemplate, escapeHtml, MAX_RENDERED_BYTES } from '../../core/template-render.js';
import { startTestService, type SignedUp, type TestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { errorOf } from '../helpers/errors.js';
import { randomUUID } from 'node:crypto';
import type { Db } from '../../storage/pg/client.js';
import { templateReads } from '../../storage/pg/templates.js';

const SCRIPT = `<script>alert("x")</script> & 'y'`;
const SCRIPT_ESCAPED = '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;';

/** RFC 2047 encoded words (as nodemailer writes them: UTF-8, Q or B), decoded; adjacent words joined. */
const decodeWords = (v: string) =>
  v.replace(/\?=\s+=\?/g, '?==?').replace(/=\?UTF-8\?([QB])\?([^?]*)\?=/gi, (_, enc: string, text: string) =>
    enc.toUpperCase() === 'B'
      ? Buffer.from(text, 'base64').toString('utf8')
      : Buffer.from(
          text.replace(/_/g, ' ').replace(/=([0-9A-F]{2})/gi, (_x, h: string) => String.fromCharCode(parseInt(h, 16))),
          'latin1',
        ).toString('utf8'),
  );

/** The decoded subject and text/plain and text/html parts of a composed message. */
function mimeParts(raw: Buffer): { text: string | null; html: string | null; subject: string | null } {
  const s = raw.toString('utf8');
  const head = s.split('\r\n\r\n')[0] ?? '';
  const folded = /^Subject: (.*(?:\r\n[ \t].*)*)/im.exec(head)?.[1]?.replace(/\r\n[ \t]/g, ' ');
  const subject = folded === undefined ? null : decodeWords(folded);
  const out: { text: string | null; html: string | null; subject: string | null } = { text: null, html: null, subject };
  const boundary = /boundary="?([^";\r\n]+)"?/i.exec(head)?.[1];
  const chunks = boundary ? s.split(`--${boundary}`).slice(1, -1) : [s];
  for (const chunk of chunks) {
    const [h = '', ...rest] = chunk.replace(/^\r\n/, '').split('\r\n\r\n');
    let body = rest.join('\r\n\r\n').replace(/\r\n$/, '');
    const cte = /^Content-Transfer-Encoding: *(\S+)/im.exec(h)?.[1]?.toLowerCase();
    if (cte === 'quoted-printable') {
      body = Buffer.from(
        body.replace(/=\r\n/g, '').replace(/=([0-9A-F]{2})/gi, (_, x: string) => String.fromCharCode(parseInt(x, 16))),
        'latin1',
      ).toString('utf8');
    } else if (cte === 'base64') body = Buffer.from(body, 'base64').toString('utf8');
    if (/^Content-Type: *text\/plain/im.test(h)) out.text = body;
    if (/^Content-Type: *text\/html/im.test(h)) out.html = body;
  }
  return out;
}

t.test('render, as a pure function', async (t) => {
  const r = renderTemplate(
    { subject: 'Hi {{ name }}', html: '<p title="{{name}}">{{name}}</p>', text: '{{name}} {{team}}' },
    [{ name: 'team', default: 'Acme' }],
    { name: SCRIPT },
  );
  t.same(
    r,
    {
      ok: true,
      parts: {
        subject: `Hi ${SCRIPT}`,
        html: `<p title="${SCRIPT_ESCAPED}">${SCRIPT_ESCAPED}</p>`,
        text: `${SCRIPT} Acme`,
      },
    },
    'escaped in html (element and attribute), verbatim in subject and text; defaults fill in',
  );
  t.equal(escapeHtml(`&<>"'`), '&amp;&lt;&gt;&quot;&#39;');

  t.same(
    renderTemplate({ subject: null, html: null, text: '{{a}}{{b}}{{a}}{{ c }}' }, [{ name: 'c' }], {}),
    { ok: false, reason: 'missing', names: ['a', 'b', 'c'] },
    'every missing name, once, in order; a variable without default is missing',
  );
  t.same(
    renderTemplate(
      { subject: '{{constructor}}', html: '{{__proto__}}', text: '{{toString}} {{hasOwnProperty}}' },
      [],
      {},
    ),
    { ok: false, reason: 'missing', names: ['constructor', '__proto__', 'toString', 'hasOwnProperty'] },
    'prototype names are plain missing names',
  );
  t.same(
    renderTemplate(
      { subject: null, html: null, text: '[{{__proto__}}] [{{constructor}}]' },
      [],
      JSON.parse('{"__proto__":"p","constructor":"c"}'),
    ),
    { ok: true, parts: { subject: null, html: null, text: '[p] [c]' } },
    'given as own keys, they are plain values',
  );
  t.same(
    renderTemplate({ subject: null, html: null, text: '{{n}} {{b}} {{d}}' }, [{ name: 'd', default: 'dflt' }], {
      n: 42,
      b: false,
      d: null,
    }),
    { ok: true, parts: { subject: null, html: null, text: '42 false dflt' } },
    'numbers and booleans as JSON writes them; null takes the default',
  );
  t.same(
    renderTemplate({ subject: null, html: '{{a.b}} {{ #if x }} {{\nname\n}} {{{name}}}', text: null }, [], {
      name: 'N',
    }),
    { ok: true, parts: { subject: null, html: '{{a.b}} {{ #if x }} {{\nname\n}} {N}', text: null } },
    'nothing but {{name}} is a placeholder',
  );

  t.same(
    renderTemplate({ subject: 'Re: {{a}} {{b}}', html: '{{c}}', text: null }, [], {
      a: 'x\r\nBcc: evil@example.com',
      b: 'ok',
      c: '\n',
    }),
    { ok: false, reason: 'subject_break', names: ['a'] },
    'a value that would break the subject; line breaks elsewhere are fine',
  );
  t.same(renderTemplate({ subject: null, html: null, text: '{{x}}' }, [], { x: 'nul\0' }), {
    ok: true,
    parts: { subject: null, html: null, text: 'nul\0' },
  });

  const big = 'x'.repeat(300_000);
  t.same(
    renderTemplate({ subject: null, html: '{{v}}{{v}}{{v}}{{v}}', text: null }, [], { v: big }),
    { ok: false, reason: 'too_large', limitBytes: MAX_RENDERED_BYTES },
    'output bounded',
  );
  t.same(
    renderTemplate({ subject: null, html: null, text: '{{v}}'.repeat(100_000) }, [], { v: big }),
    { ok: false, reason: 'too_large', limitBytes: MAX_RENDERED_BYTES },
    'a small template with a large value repeated stops early',
  );
  t.ok(
    renderTemplate({ subject: null, html: '{{v}}', text: '{{v}}' }, [], { v: 'é'.repeat(200_000) }).ok,
    'just under the bound (UTF-8 octets) passes',
  );
  t.same(
    renderTemplate({ subject: null, html: '{{v}}', text: '{{v}}{{v}}' }, [], { v: 'é'.repeat(200_000) }),
    { ok: false, reason: 'too_large', limitBytes: MAX_RENDERED_BYTES },
    'counted in UTF-8 octets, over all parts',
  );
});

/** An organization with an owner and one member of each other role. */
async function orgWithRoles(svc: TestService, name: string) {
  const owner = await svc.signup();
  const { organization, organizationToken } = await owner.client.console.organizations.create({ name });
  const roles: Record<'admin' | 'member' | 'auditor', SignedUp> = {} as never;
  for (const role of ['admin', 'member', 'auditor'] as const) {
    const { code } = await owner.client.console.organizations.joinCodes.create({ id: organization.id, role });
    const u = await svc.signup();
    await u.client.console.organizations.join({ code });
    roles[role] = u;
  }
  return {
    owner,
    orgId: organization.id,
    orgToken: svc.client({ keyId: organizationToken.tokenId, secret: organizationToken.secret }),
    ...roles,
  };
}

t.test('CRUD: owner writes, members read, versions are kept', async (t) => {
  const svc = await startTestService(t);
  const o = await orgWithRoles(svc, 'Templates Org');
  const tpl = o.owner.client.modules.templates.templates;

  const { template } = await tpl.create({
    organizationId: o.orgId,
    name: 'Welcome',
    subject: 'Welcome, {{name}}',
    html: '<p>Hi {{name}}</p>',
    text: 'Hi {{name}}',
    variables: [{ name: 'name', default: 'friend' }],
  });
  t.match(template, {
    organization_id: o.orgId,
    name: 'Welcome',
    subject: 'Welcome, {{name}}',
    html: '<p>Hi {{name}}</p>',
    text: 'Hi {{name}}',
    variables: [{ name: 'name', default: 'friend' }],
    is_public: false,
    version: 1,
    created_by: o.owner.userId,
  });

  for (const role of ['admin', 'member', 'auditor'] as const) {
    const c = o[role].client.modules.templates.templates;
    t.same(
      (await c.list({ organizationId: o.orgId })).templates.map((x) => x.id),
      [template.id],
      `${role} lists`,
    );
    t.equal((await c.get({ organizationId: o.orgId, id: template.id })).template.name, 'Welcome', `${role} gets`);
    t.same(
      await c.render({ organizationId: o.orgId, id: template.id, values: { name: 'Ann' } }),
      { subject: 'Welcome, Ann', html: '<p>Hi Ann</p>', text: 'Hi Ann' },
      `${role} renders`,
    );
    // Called one at a time: a rejection is awaited as soon as it happens.
    for (const call of [
      () => c.create({ organizationId: o.orgId, name: 'x', subject: 'x', text: 'x' }),
      () => c.update({ organizationId: o.orgId, id: template.id, name: 'x' }),
      () => c.delete({ organizationId: o.orgId, id: template.id }),
    ])
      t.match(await errorOf(call()), { status: 403, code: 'forbidden' }, `${role} may not write`);
  }
  t.same(
    await tpl.render({ organizationId: o.orgId, id: template.id }),
    { subject: 'Welcome, friend', html: '<p>Hi friend</p>', text: 'Hi friend' },
    'the default applies without values',
  );

  // Updates keep the previous versions.
  const v2 = (await tpl.update({ organizationId: o.orgId, id: template.id, subject: 'Hello {{name}}', html: null }))
    .template;
  t.match(
    v2,
    { version: 2, subject: 'Hello {{name}}', html: null, text: 'Hi {{name}}', name: 'Welcome' },
    'version 2: only the fields given changed',
  );
  const v3 = (await tpl.update({ organizationId: o.orgId, id: template.id, variables: [], isPublic: true })).template;
  t.match(v3, { version: 3, variables: [], is_public: true });
  t.equal(
    (await tpl.update({ organizationId: o.orgId, id: template.id })).template.version,
    3,
    'an update that changes nothing makes no version',
  );
  const versions = await svc.running.storage.db.query<{
    version: number;
    subject: string;
    html: string | null;
    is_public: boolean;
  }>('SELECT version, subject, html, is_public FROM template_versions WHERE template_id = $1 ORDER BY version', [
    template.id,
  ]);
  t.same(
    versions,
    [
      { version: 1, subject: 'Welcome, {{name}}', html: '<p>Hi {{name}}</p>', is_public: false },
      { version: 2, subject: 'Hello {{name}}', html: null, is_public: false },
      { version: 3, subject: 'Hello {{name}}', html: null, is_public: true },
    ],
    'every version is kept',
  );

  // Validation.
  t.match(
    await errorOf(tpl.update({ organizationId: o.orgId, id: template.id, text: null })),
    { status: 400, code: 'invalid_request' },
    'clearing the last part is refused',
  );
  t.match(
    await errorOf(tpl.create({ organizationId: o.orgId, name: 'n', subject: 's' })),
    { status: 400, code: 'invalid_request' },
    'html or text is required',
  );
  t.match(
    await errorOf(tpl.create({ organizationId: o.orgId, name: 'n', subject: 'a\r\nBcc: x@example.com', text: 't' })),
    { status: 400, code: 'invalid_request', details: [{ field: 'body.subject' }] },
    'no line break in a subject',
  );
  t.match(
    await errorOf(
      tpl.create({
        organizationId: o.orgId,
        name: 'n',
        subject: 's',
        text: 't',
        variables: [{ name: 'a' }, { name: 'a' }],
      }),
    ),
    { status: 400, details: [{ field: 'body.variables[1].name' }] },
    'a variable named twice',
  );
  t.match(
    await errorOf(
      tpl.create({ organizationId: o.orgId, name: 'n', subject: 's', text: 't', variables: [{ name: 'a b' }] }),
    ),
    { status: 400, code: 'invalid_request' },
    'a variable name is an identifier',
  );
  t.match(await errorOf(tpl.get({ organizationId: o.orgId, id: 'not-a-uuid' })), { status: 404, code: 'not_found' });

  // The organization token and the platform key act on the organization fully.
  svc.clock.advance(1000);
  const byToken = (
    await o.orgToken.modules.templates.templates.create({ organizationId: o.orgId, name: 'T', subject: 's', text: 't' })
  ).template;
  t.equal(byToken.created_by, null, 'made by the organization token');
  const byAdmin = (
    await svc.admin().modules.templates.templates.update({ organizationId: o.orgId, id: byToken.id, name: 'T2' })
  ).template;
  t.equal(byAdmin.version, 2, 'updated with the platform key');
  t.same(
    (await o.orgToken.modules.templates.templates.list({ organizationId: o.orgId })).templates.map((x) => x.name),
    ['T2', 'Welcome'],
    'newest first',
  );

  // Writes leave audit rows naming the template.
  const audit = await svc.running.storage.db.query<{ action: string }>(
    `SELECT action FROM audit_log WHERE target_id = $1 ORDER BY seq`,
    [template.id],
  );
  t.same(
    audit.map((a) => a.action),
    [
      'modules.templates.templates.create',
      'modules.templates.templates.update',
      'modules.templates.templates.update',
      'modules.templates.templates.update',
    ],
    'create and updates audited; render is not',
  );

  t.same(await tpl.delete({ organizationId: o.orgId, id: template.id }), { ok: true });
  t.match(await errorOf(tpl.get({ organizationId: o.orgId, id: template.id })), { status: 404 }, 'gone');
  t.same(
    await svc.running.storage.db.query('SELECT 1 FROM template_versions WHERE template_id = $1', [template.id]),
    [],
    'with its versions',
  );
  t.match(await errorOf(tpl.delete({ organizationId: o.orgId, id: template.id })), { status: 404 }, 'deleting twice');
});

t.test('public templates and the cross-tenant rules', async (t) => {
  const svc = await startTestService(t);
  const a = await svc.signup();
  const aOrg = (await a.client.console.organizations.create({ name: 'A' })).organization.id;
  const b = await svc.signup();
  const bOrg = (await b.client.console.organizations.create({ name: 'B' })).organization.id;
  const A = a.client.modules.templates.templates;
  const B = b.client.modules.templates.templates;

  const priv = (await A.create({ organizationId: aOrg, name: 'private', subject: 's', text: 'secret {{x}}' })).template;
  const pub = (
    await A.create({ organizationId: aOrg, name: 'public', subject: 'Hi {{x}}', html: '<b>{{x}}</b>', isPublic: true })
  ).template;
  const own = (await B.create({ organizationId: bOrg, name: 'b-own', subject: 's', text: 't' })).template;

  // Another organization's private template: 404 everywhere.
  for (const [what, call] of [
    ['get', () => B.get({ organizationId: bOrg, id: priv.id })],
    ['render', () => B.render({ organizationId: bOrg, id: priv.id, values: { x: '1' } })],
    ['update', () => B.update({ organizationId: bOrg, id: priv.id, name: 'stolen' })],
    ['delete', () => B.delete({ organizationId: bOrg, id: priv.id })],
  ] as const) {
    const e = await errorOf(call());
    t.match(e, { status: 404, code: 'not_found' }, `${what}: 404`);
    t.notMatch(JSON.stringify(e.details ?? null) + e.message, /private|secret/, `${what}: nothing of it in the answer`);
  }
  // A's organization, named by a non-member: 404 as for every organization route.
  t.match(await errorOf(B.get({ organizationId: aOrg, id: pub.id })), { status: 404 });
  t.match(await errorOf(B.listPublic({ organizationId: aOrg })), { status: 404 });

  // A public template: seen and rendered by every tenant, changed only by its own.
  t.equal((await B.get({ organizationId: bOrg, id: pub.id })).template.name, 'public');
  t.same(await B.render({ organizationId: bOrg, id: pub.id, values: { x: '<i>' } }), {
    subject: 'Hi <i>',
    html: '<b>&lt;i&gt;</b>',
    text: null,
  });
  t.same(
    (await B.listPublic({ organizationId: bOrg })).templates.map((x) => x.id),
    [pub.id],
    'list-public: every public one, no private one',
  );
  t.same(
    (await B.list({ organizationId: bOrg })).templates.map((x) => x.id),
    [own.id],
    'list: only the own',
  );
  t.match(
    await errorOf(B.update({ organizationId: bOrg, id: pub.id, isPublic: false })),
    { status: 403, code: 'forbidden' },
    'update: 403',
  );
  t.match(
    await errorOf(B.delete({ organizationId: bOrg, id: pub.id })),
    { status: 403, code: 'forbidden' },
    'delete: 403',
  );

  // Staff act on any organization, but still as that organization.
  const staff = await svc.signup();
  await svc.running.storage.db.query(`UPDATE users SET role = 'staff' WHERE id = $1`, [staff.userId]);
  t.equal(
    (await staff.client.modules.templates.templates.get({ organizationId: aOrg, id: priv.id })).template.id,
    priv.id,
    'staff on A',
  );
  t.match(
    await errorOf(staff.client.modules.templates.templates.get({ organizationId: bOrg, id: priv.id })),
    { status: 404 },
    'staff on B: 404',
  );

  // The owner makes it private again: gone for B.
  await A.update({ organizationId: aOrg, id: pub.id, isPublic: false });
  t.match(await errorOf(B.get({ organizationId: bOrg, id: pub.id })), { status: 404 });
  t.same((await B.listPublic({ organizationId: bOrg })).templates, []);
  t.equal((await A.get({ organizationId: aOrg, id: priv.id })).template.version, 1, 'nothing of A changed');
});

t.test('render: by id or inline, escaping, missing variables, prototype names, the bound', async (t) => {
  const svc = await startTestService(t);
  const a = await svc.signup();
  const org = (await a.client.console.organizations.create({ name: 'R' })).organization.id;
  const R = a.client.modules.templates.templates;

  t.same(
    await R.render({
      organizationId: org,
      subject: 'To {{name}}',
      html: '<p class="{{name}}">{{name}}</p>',
      text: '{{name}}',
      values: { name: SCRIPT },
    }),
    { subject: `To ${SCRIPT}`, html: `<p class="${SCRIPT_ESCAPED}">${SCRIPT_ESCAPED}</p>`, text: SCRIPT },
    '<script>, quotes and ampersands escaped in html, verbatim in text and subject',
  );
  t.same(
    await R.render({ organizationId: org, html: '{{ a }}', variables: [{ name: 'a', default: 'A&' }] }),
    { subject: null, html: 'A&amp;', text: null },
    'inline variables with defaults',
  );

  const missing = await errorOf(
    R.render({ organizationId: org, subject: '{{s}}', text: '{{a}} {{b}} {{a}}', values: { b: 'x' } }),
  );
  t.match(
    missing,
    { status: 422, code: 'unprocessable', details: { missing: ['s', 'a'] } },
    'missing variables: 422 listing them',
  );
  const proto = await errorOf(
    R.render({ organizationId: org, text: '{{constructor}} {{__proto__}} {{toString}}', values: { other: 'x' } }),
  );
  t.match(
    proto,
    { status: 422, details: { missing: ['constructor', '__proto__', 'toString'] } },
    'prototype names are missing names',
  );
  // A JSON body whose values hold an own "__proto__" key: a plain value, no prototype is touched.
  const res = await R.render(
    JSON.parse(
      `{"organizationId":"${org}","text":"{{__proto__}} {{constructor}}","values":{"__proto__":"P","constructor":"C"}}`,
    ),
  );
  t.same(res, { subject: null, html: null, text: 'P C' });

  const br = await errorOf(
    R.render({ organizationId: org, subject: 'Hi {{name}}', text: 't', values: { name: 'x\nBcc: a@example.com' } }),
  );
  t.match(
    br,
    { status: 400, code: 'invalid_request', details: [{ field: 'body.values.name' }] },
    'a value breaking the subject: 400 naming it',
  );

  const big = await errorOf(
    R.render({ organizationId: org, html: '{{v}}{{v}}{{v}}{{v}}', values: { v: 'x'.repeat(300_000) } }),
  );
  t.match(big, { status: 422, code: 'unprocessable', details: { limitBytes: 1024 * 1024 } }, 'output past 1 MB: 422');

  const { template } = await R.create({ organizationId: org, name: 'n', subject: 's', text: 't' });
  t.match(
    await errorOf(R.render({ organizationId: org, id: template.id, html: 'x' })),
    { status: 400, details: [{ field: 'body.html' }] },
    'id and inline: 400',
  );
  t.match(await errorOf(R.render({ organizationId: org })), { status: 400 }, 'neither id nor content: 400');
  t.match(
    await errorOf(R.render({ organizationId: org, text: 'x', values: { a: { nested: true } } as never })),
    { status: 400 },
    'values are scalars',
  );
});

t.test(
  'sendEmail with templateId: rendered into the spooled body, the message records template and version',
  async (t) => {
    const svc = await startTestService(t);
    const s = await sender(svc);
    const T = s.owner.client.modules.templates.templates;
    const { template } = await T.create({
      organizationId: s.orgId,
      name: 'receipt',
      subject: 'Template subject {{name}}',
      html: '<p>Hi {{name}}, from {{team}}</p>',
      text: 'Hi {{name}}, from {{team}}',
      variables: [{ name: 'name' }, { name: 'team', default: 'Acme & Co' }],
    });
    const { db, spool } = svc.running.storage;
    const recorded = async (id: string) =>
      (
        await db.query<{ template_id: string | null; template_version: number | null; subject: string }>(
          'SELECT template_id, template_version, subject FROM messages WHERE id = $1',
          [id],
        )
      )[0];

    const name = `<script>alert("x")</script> & 'y'`;
    const res = await s.key.v1.services.sendEmail({
      from: `app@${s.domain}`,
      to: 'rcpt@example.com',
      subject: 'Hello {{name}}',
      templateId: template.id,
      variables: { name },
      html: '<p>ignored</p>',
      text: 'ignored',
    });
    t.equal(res.status, 'queued');
    const parts = mimeParts(spool.body(res.providerMessageId)!);
    t.equal(
      parts.html,
      `<p>Hi ${SCRIPT_ESCAPED}, from Acme &amp; Co</p>`,
      'html: the template, values escaped, default applied',
    );
    t.equal(parts.text, `Hi ${name}, from Acme & Co`, 'text: verbatim');
    t.equal(parts.subject, `Hello ${name}`, "subject: the request's, rendered verbatim");
    t.same(
      await recorded(res.providerMessageId),
      { template_id: template.id, template_version: 1, subject: `Hello ${name}` },
      'template id and version recorded',
    );

    await T.update({ organizationId: s.orgId, id: template.id, text: 'v2 {{name}}' });
    const res2 = await s.key.v1.services.sendEmail({
      from: `app@${s.domain}`,
      to: 'rcpt@example.com',
      subject: 'x',
      templateId: template.id,
      variables: { name: 'N' },
    });
    t.equal(mimeParts(spool.body(res2.providerMessageId)!).text, 'v2 N', 'the current version is sent');
    t.match(await recorded(res2.providerMessageId), { template_id: template.id, template_version: 2 });

    const plain = await s.key.v1.services.sendEmail({
      from: `app@${s.domain}`,
      to: 'rcpt@example.com',
      subject: '{{x}}',
      text: 'a {{x}}',
    });
    t.match(
      await recorded(plain.providerMessageId),
      { template_id: null, template_version: null, subject: '{{x}}' },
      'no template, no variables: sent as given',
    );
    const inline = await s.key.v1.services.sendEmail({
      from: `app@${s.domain}`,
      to: 'rcpt@example.com',
      subject: 'S {{x}}',
      html: '<i>{{x}}</i>',
      variables: { x: '&' },
    });
    t.same(
      mimeParts(spool.body(inline.providerMessageId)!),
      // html alone gets a text alternative made from the rendered html (mail/compose.ts).
      { subject: 'S &', html: '<i>&amp;</i>', text: '&' },
      'variables alone render the own content',
    );

    const count = async () =>
      (
        await db.query<{ n: number }>('SELECT count(*)::int AS n FROM messages WHERE project_id = $1', [s.projectId])
      )[0]!.n;
    const before = await count();
    t.match(
      await errorOf(
        s.key.v1.services.sendEmail({
          from: `app@${s.domain}`,
          to: 'r@example.com',
          subject: '{{subj}}',
          templateId: template.id,
        }),
      ),
      { status: 422, code: 'unprocessable', details: { missing: ['subj', 'name'] } },
      'missing variables: 422 listing them',
    );
    t.match(
      await errorOf(
        s.key.v1.services.sendEmail({
          from: `app@${s.domain}`,
          to: 'r@example.com',
          subject: 'Hi {{name}}',
          templateId: template.id,
          variables: { name: 'a\r\nBcc: x@example.com' },
        }),
      ),
      { status: 400, code: 'invalid_request', details: [{ field: 'body.variables.name' }] },
      'a variable breaking the subject: 400',
    );
    t.match(
      await errorOf(
        s.key.v1.services.sendEmail({ from: `app@${s.domain}`, to: 'r@example.com', subject: 's', templateId: 'nope' }),
      ),
      { status: 404, code: 'not_found' },
      'unknown template: 404',
    );

    // Another organization's templates: private is 404 (as unknown), public is usable.
    const other = await sender(svc);
    const O = other.owner.client.modules.templates.templates;
    const foreignPrivate = (
      await O.create({ organizationId: other.orgId, name: 'p', subject: 's', text: 'private body' })
    ).template;
    const foreignPublic = (
      await O.create({
        organizationId: other.orgId,
        name: 'q',
        subject: 's',
        text: 'public body {{x}}',
        isPublic: true,
      })
    ).template;
    const e = await errorOf(
      s.key.v1.services.sendEmail({
        from: `app@${s.domain}`,
        to: 'r@example.com',
        subject: 's',
        templateId: foreignPrivate.id,
      }),
    );
    t.match(
      e,
      { status: 404, code: 'not_found', message: 'No such template.' },
      "another organization's private template: 404",
    );
    t.equal(await count(), before, 'nothing accepted by the refused sends');
    const pubSent = await s.key.v1.services.sendEmail({
      from: `app@${s.domain}`,
      to: 'r@example.com',
      subject: 's',
      templateId: foreignPublic.id,
      variables: { x: '1' },
    });
    t.equal(
      mimeParts(spool.body(pubSent.providerMessageId)!).text,
      'public body 1',
      'a public template of another organization',
    );
    t.match(await recorded(pubSent.providerMessageId), { template_id: foreignPublic.id, template_version: 1 });

    // The platform key sends on behalf of the project owning the from domain: that organization's templates.
    const onBehalf = await svc.admin().v1.services.sendEmail({
      from: `app@${s.domain}`,
      to: 'r@example.com',
      subject: 's',
      templateId: template.id,
      variables: { name: 'P' },
    });
    t.equal(mimeParts(spool.body(onBehalf.providerMessageId)!).text, 'v2 P');
    t.match(
      await errorOf(
        svc.admin().v1.services.sendEmail({
          from: `app@${s.domain}`,
          to: 'r@example.com',
          subject: 's',
          templateId: foreignPrivate.id,
        }),
      ),
      { status: 404 },
      "on behalf: another organization's private template is 404 too",
    );

    // Idempotency covers templateId and variables: a changed value is another body.
    const k = {
      from: `app@${s.domain}`,
      to: 'r@example.com',
      subject: 's',
      templateId: template.id,
      idempotencyKey: 'tpl-key-0001',
    };
    const first = await s.key.v1.services.sendEmail({ ...k, variables: { name: 'one' } });
    t.equal(
      (await s.key.v1.services.sendEmail({ ...k, variables: { name: 'one' } })).providerMessageId,
      first.providerMessageId,
      'replayed',
    );
    t.match(await errorOf(s.key.v1.services.sendEmail({ ...k, variables: { name: 'two' } })), {
      status: 409,
      code: 'idempotency_key_reused',
    });
  },
);

t.test("concurrent sends' template reads share a statement, and are never cached", async (t) => {
  const svc = await startTestService(t);
  const s = await sender(svc);
  const T = s.owner.client.modules.templates.templates;
  const made = (name: string) => T.create({ organizationId: s.orgId, name, subject: 's', text: `text of ${name}` });
  const [{ template: a }, { template: b }] = await Promise.all([made('a'), made('b')]);
  // The service's own Db, every statement counted on its way.
  const { db } = svc.running.storage;
  let statements = 0;
  const counted: Db = { ...db, query: (sql, params) => (statements++, db.query(sql, params)) };
  const read = templateReads(counted);
  const got = await Promise.all([a.id, b.id, a.id, 'not-a-uuid', randomUUID()].map(read));
  t.same(
    got.map((x) => x?.text ?? null),
    ['text of a', 'text of b', 'text of a', null, null],
    'each read answers its own id; an unknown id and one that is no UUID, none',
  );
  t.equal(statements, 1, 'the four reads of UUIDs, made together, were one statement');
  await T.update({ organizationId: s.orgId, id: a.id, text: 'changed' });
  t.equal((await read(a.id))?.text, 'changed', 'an update shows in the next read');
});
