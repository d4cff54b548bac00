// SMTP TLS Reporting (RFC 8460) end to end on loopback: deliveries under an MTA-STS enforce policy (one MX
// whose certificate is not for its name, then one that is) and without a policy are counted per domain, day,
// policy and result; once the UTC day is over (the service's clock moved), each domain's `_smtp._tls` record
// says where its report goes: a mailto: rua gets a multipart/report through our own MTA (to a loopback sink
// reached by MX), an https: rua a POST of application/tlsrpt+gzip to a loopback server whose certificate the
// service trusts through SVC_EXTRA_CA_CERTS. Both gunzip to JSON valid under RFC 8460 §4.4's fields, with the
// right counts, and neither is sent twice.
import t from 'tap';
import https from 'node:https';
import { gunzipSync } from 'node:zlib';
import type { AddressInfo } from 'node:net';
import { Ajv } from 'ajv';
import addFormats from 'ajv-formats';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { makeCa, policyText, startPolicyServer } from './tls-fixtures.js';
import { tlsReport } from '../../bin/tls-report.js';
import { parseTlsRptRecord, reportFilename } from '../../mail/tls-report.js';

/** RFC 8460 §4.4 as a JSON schema: the required fields and their types. */
const REPORT_SCHEMA = {
  type: 'object',
  required: ['organization-name', 'date-range', 'contact-info', 'report-id', 'policies'],
  properties: {
    'organization-name': { type: 'string', minLength: 1 },
    'date-range': {
      type: 'object',
      required: ['start-datetime', 'end-datetime'],
      properties: {
        'start-datetime': { type: 'string', format: 'date-time' },
        'end-datetime': { type: 'string', format: 'date-time' },
      },
    },
    'contact-info': { type: 'string', minLength: 1 },
    'report-id': { type: 'string', minLength: 1 },
    policies: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['policy', 'summary'],
        properties: {
          policy: {
            type: 'object',
            required: ['policy-type', 'policy-domain'],
            properties: {
              'policy-type': { enum: ['tlsa', 'sts', 'no-policy-found'] },
              'policy-string': { type: 'array', items: { type: 'string' } },
              'policy-domain': { type: 'string', minLength: 1 },
              'mx-host': { type: 'array', items: { type: 'string' } },
            },
          },
          summary: {
            type: 'object',
            required: ['total-successful-session-count', 'total-failure-session-count'],
            properties: {
              'total-successful-session-count': { type: 'integer', minimum: 0 },
              'total-failure-session-count': { type: 'integer', minimum: 0 },
            },
          },
          'failure-details': {
            type: 'array',
            items: {
              type: 'object',
              required: ['result-type', 'failed-session-count'],
              properties: {
                'result-type': {
                  enum: [
                    'starttls-not-supported',
                    'certificate-host-mismatch',
                    'certificate-expired',
                    'certificate-not-trusted',
                    'validation-failure',
                    'tlsa-invalid',
                    'dnssec-invalid',
                    'dane-required',
                    'sts-policy-fetch-error',
                    'sts-policy-invalid',
                    'sts-webpki-invalid',
                  ],
                },
                'sending-mta-ip': { type: 'string' },
                'receiving-mx-hostname': { type: 'string' },
                'receiving-mx-helo': { type: 'string' },
                'receiving-ip': { type: 'string' },
                'failed-session-count': { type: 'integer', minimum: 1 },
                'additional-information': { type: 'string' },
                'failure-reason-code': { type: 'string' },
              },
            },
          },
        },
      },
    },
  },
};

const ajv = new Ajv({ allErrors: true, strict: true });
addFormats.default(ajv);
const validReport = ajv.compile(REPORT_SCHEMA);

// The record is the recipient domain's to write: whitespace around a second "=" made the regex this replaced
// backtrack cubically (4 kB: 21 s). A 30 s timeout judges, not a measured time.
t.test('a record built to make a regex backtrack is read once', { timeout: 30_000 }, async (t) => {
  const ws = '\t'.repeat(30_000);
  t.same(parseTlsRptRecord([`v=TLSRPTv1; rua=${ws}=${ws}\n\u0000`]), []);
});

t.test('the _smtp._tls record', async (t) => {
  t.same(parseTlsRptRecord(['v=TLSRPTv1; rua=mailto:a@b.example,https://r.example/x']), [
    'mailto:a@b.example',
    'https://r.example/x',
  ]);
  t.same(parseTlsRptRecord(['v=TLSRPTv1;rua=mailto:a@b.example', 'v=TLSRPTv1;rua=mailto:c@d.example']), [], 'two');
  t.same(parseTlsRptRecord(['v=spf1 -all', 'v=TLSRPTv1; rua=ftp://x, mailto:a@b.example']), ['mailto:a@b.example']);
  t.same(parseTlsRptRecord(['v=TLSRPTv2; rua=mailto:a@b.example']), []);
  t.same(parseTlsRptRecord(['v=TLSRPTv1; x=1;  rua =\tmailto:a@b.example \t']), ['mailto:a@b.example']);
  t.same(parseTlsRptRecord(['v=TLSRPTv1; rua=mailto:a@b.example\nmailto:c@d.example']), [], 'a line break inside');
  t.equal(
    reportFilename('mta.test', 'example.com', '2024-03-01'),
    'mta.test!example.com!1709251200!1709337600.json.gz',
    'RFC 8460 §5.3 file name',
  );
});

t.test('daily reports to mailto: and https: rua, once', async (t) => {
  const ca = await makeCa(t);
  const leaf = await ca.leaf([
    'mx2.enforce.test',
    'mx.plain.test',
    'mx.reports.test',
    'mta-sts.enforce.test',
    'collector.test',
  ]);
  const policies = await startPolicyServer(t, leaf);
  const { zone, sink, svc } = await deliveryWorld(t, {
    sink: { cert: leaf.cert, key: leaf.key },
    env: {
      SVC_EXTRA_CA_CERTS: ca.caPath,
      SVC_MTA_STS_PORT: String(policies.port),
      SVC_TLS_REPORT_ORG: 'Example Sender Ltd',
    },
  });

  // The https rua collector.
  const posts: { type: string | undefined; url: string | undefined; body: Buffer }[] = [];
  const collector = https.createServer({ cert: leaf.cert, key: leaf.key }, (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      posts.push({ type: req.headers['content-type'], url: req.url, body: Buffer.concat(chunks) });
      res.writeHead(201).end();
    });
  });
  await new Promise<void>((r) => collector.listen(0, '127.0.0.1', () => r()));
  t.teardown(() => new Promise<void>((r) => (collector.closeAllConnections(), collector.close(() => r()))));
  const collectorPort = (collector.address() as AddressInfo).port;

  // enforce.test: MTA-STS enforce over two MX hosts; the first one's certificate is not for its name.
  zone.mx('enforce.test', 10, 'mx1.enforce.test').a('mx1.enforce.test', '127.0.0.1');
  zone.mx('enforce.test', 20, 'mx2.enforce.test').a('mx2.enforce.test', '127.0.0.1');
  zone.a('mta-sts.enforce.test', '127.0.0.1');
  zone.txt('_mta-sts.enforce.test', 'v=STSv1; id=e1;');
  const stsText = policyText('enforce', ['*.enforce.test']);
  policies.policies.set('mta-sts.enforce.test', stsText);
  zone.txt('_smtp._tls.enforce.test', 'v=TLSRPTv1; rua=mailto:tlsrpt@reports.test');
  zone.mx('reports.test', 10, 'mx.reports.test').a('mx.reports.test', '127.0.0.1');
  // plain.test: no policy; reports over https.
  zone.mx('plain.test', 10, 'mx.plain.test').a('mx.plain.test', '127.0.0.1');
  zone.a('collector.test', '127.0.0.1');
  zone.txt('_smtp._tls.plain.test', `v=TLSRPTv1; rua=https://collector.test:${collectorPort}/v1/tlsrpt`);

  const s = await sender(svc);
  for (const [host, value] of Object.entries(s.dkimTxt)) zone.txt(host, value);
  const send = (to: string) =>
    s.key.v1.services.sendEmail({ from: `ada@${s.domain}`, to, subject: `to ${to}`, text: 'x' });
  await send('ok@enforce.test');
  await send('ok@plain.test');
  await sink.waitForMessages(2, 20_000);
  const day = new Date(svc.clock.now()).toISOString().slice(0, 10);
  const reporter = svc.running.mta!.tlsReports;

  // The day is not over: the counts are flushed, no report goes.
  await reporter.run();
  t.equal(posts.length, 0, 'nothing reported before the day ends');
  const io = { lines: [] as string[], out: (l: string) => io.lines.push(l), err: (l: string) => io.lines.push(l) };
  t.equal(await tlsReport(['--day', day, '--json'], svc.running.ctx.config, io, svc.running.storage.db), 0);
  const cli = JSON.parse(io.lines[0]!) as { domains: { domain: string; policies: unknown[]; report: unknown }[] };
  t.match(
    cli.domains,
    [
      {
        domain: 'enforce.test',
        report: null,
        policies: [
          {
            type: 'sts',
            mxHost: ['*.enforce.test'],
            successful: 1,
            failed: 1,
            failures: [{ result: 'certificate-host-mismatch', receivingMx: 'mx1.enforce.test', sessions: 1 }],
          },
        ],
      },
      { domain: 'plain.test', report: null, policies: [{ type: 'no-policy-found', successful: 1, failed: 0 }] },
    ],
    'svc tls-report --json: the day so far',
  );
  io.lines.length = 0;
  t.equal(await tlsReport(['--day', day], svc.running.ctx.config, io, svc.running.storage.db), 0);
  t.match(
    io.lines.join('\n'),
    /enforce\.test {2}report: not yet\n {2}sts mx \*\.enforce\.test: 1 successful, 1 failed/,
  );
  t.equal(await tlsReport(['--day', '2024-02-30'], svc.running.ctx.config, io, svc.running.storage.db), 2);

  // The day is over.
  svc.clock.advance(25 * 3600_000);
  t.equal(await reporter.run(), 2, 'two reports sent');

  // https: POSTed, gzipped JSON.
  t.equal(posts.length, 1);
  t.equal(posts[0]!.type, 'application/tlsrpt+gzip');
  t.equal(posts[0]!.url, '/v1/tlsrpt');
  const plain = JSON.parse(gunzipSync(posts[0]!.body).toString('utf8'));
  t.ok(validReport(plain), `RFC 8460 §4.4 schema: ${ajv.errorsText(validReport.errors)}`);
  t.match(plain, {
    'organization-name': 'Example Sender Ltd',
    'date-range': { 'start-datetime': `${day}T00:00:00Z`, 'end-datetime': `${day}T23:59:59Z` },
    'contact-info': 'postmaster@mta.test',
    'report-id': `${day}.plain.test@mta.test`,
    policies: [
      {
        policy: { 'policy-type': 'no-policy-found', 'policy-domain': 'plain.test' },
        summary: { 'total-successful-session-count': 1, 'total-failure-session-count': 0 },
      },
    ],
  });
  t.equal(plain.policies.length, 1);
  t.notOk('failure-details' in plain.policies[0], 'no failures, no failure-details');

  // mailto: a message through our MTA, to the sink reached by reports.test's MX.
  const [mail] = await waitFor(
    () => {
      const m = sink.messages.filter((x) => x.rcptTo.includes('tlsrpt@reports.test'));
      return m.length ? m : null;
    },
    { timeoutMs: 20_000, what: 'the mailed report' },
  );
  const raw = mail!.raw.toString('latin1');
  const [head] = raw.split('\r\n\r\n');
  const unfolded = head!.replace(/\r\n[ \t]+/g, ' ');
  const header = (name: string) => new RegExp(`^${name}: (.*)$`, 'im').exec(unfolded)?.[1];
  const reportId = `${day}.enforce.test@mta.test`;
  t.equal(header('Subject'), `Report Domain: enforce.test Submitter: mta.test Report-ID: <${reportId}>`);
  t.equal(header('TLS-Report-Domain'), 'enforce.test');
  t.equal(header('TLS-Report-Submitter'), 'mta.test');
  t.match(header('Content-Type'), /^multipart\/report; report-type="tlsrpt"; boundary="[^"]+"$/);
  const name = reportFilename('mta.test', 'enforce.test', day);
  const part = new RegExp(
    `Content-Type: application/tlsrpt\\+gzip; name="${name.replace(/[.+]/g, '\\$&')}"\\r\\n` +
      'Content-Transfer-Encoding: base64\\r\\n' +
      `Content-Disposition: attachment; filename="[^"]+"\\r\\n\\r\\n([A-Za-z0-9+/=\\r\\n]+)\\r\\n--`,
  ).exec(raw);
  t.ok(part, 'an application/tlsrpt+gzip attachment named per RFC 8460 §5.3');
  const enforce = JSON.parse(gunzipSync(Buffer.from(part![1]!.replace(/\r\n/g, ''), 'base64')).toString('utf8'));
  t.ok(validReport(enforce), `RFC 8460 §4.4 schema: ${ajv.errorsText(validReport.errors)}`);
  t.match(enforce, {
    'report-id': reportId,
    policies: [
      {
        policy: {
          'policy-type': 'sts',
          'policy-string': ['version: STSv1', 'mode: enforce', 'mx: *.enforce.test', 'max_age: 86400'],
          'policy-domain': 'enforce.test',
          'mx-host': ['*.enforce.test'],
        },
        summary: { 'total-successful-session-count': 1, 'total-failure-session-count': 1 },
        'failure-details': [
          {
            'result-type': 'certificate-host-mismatch',
            'receiving-mx-hostname': 'mx1.enforce.test',
            'receiving-ip': '127.0.0.1',
            'failed-session-count': 1,
            'additional-information': /certificate of mx1\.enforce\.test not verified/,
          },
        ],
      },
    ],
  });
  t.equal(enforce.policies.length, 1);

  // Once: another day later, nothing more for that day.
  svc.clock.advance(25 * 3600_000);
  await reporter.run();
  const reportsOf = async () =>
    (
      await svc.running.storage.db.query<{ recipient: string }>(
        "SELECT recipient FROM notification_outbox WHERE kind = 'tls-report'",
      )
    ).map((r) => r.recipient);
  // The report mail's own delivery (to reports.test) was counted on the next day; reports.test asks for none.
  t.same(await reportsOf(), ['tlsrpt@reports.test'], 'one mailed report');
  t.equal(posts.length, 1, 'one POST');
  io.lines.length = 0;
  await tlsReport(['--day', day, '--json'], svc.running.ctx.config, io, svc.running.storage.db);
  t.match(JSON.parse(io.lines[0]!).domains, [
    { domain: 'enforce.test', report: { status: 'sent', destinations: ['mailto:tlsrpt@reports.test'], attempts: 1 } },
    {
      domain: 'plain.test',
      report: { status: 'sent', destinations: [`https://collector.test:${collectorPort}/v1/tlsrpt`] },
    },
  ]);
});
