// Issue 17 items 7 and 8: GET /metrics (Prometheus text) on the HTTP listener and on the MTA's SVC_METRICS_PORT
// listener, refused (404) outside SVC_METRICS_CIDRS; GET /ready; the info line per delivery attempt and the
// access log line per request (docs/operations.md, "Metrics" and "Logs and health").
import t from 'tap';
import http from 'node:http';
import { deliveryWorld } from '../helpers/delivery-world.js';
import { startTestService } from '../helpers/service.js';
import { sender } from '../helpers/sender.js';
import { waitFor } from '../helpers/wait-for.js';
import { logLines } from '../helpers/log-lines.js';
import { loadConfig } from '../../config/load.js';
import { READY_DB_TIMEOUT_MS } from '../../control/middleware/ops.js';

/** One sample of the text exposition format: name, labels, value. */
interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The Prometheus text format (0.0.4), as far as prom-client writes it: comments, then `name{l="v",…} value`. */
function parseProm(text: string): Sample[] {
  const out: Sample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\(.)/g, (_, c: string) => (c === 'n' ? '\n' : c));
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** The sum of the samples of `name` whose labels include `match` (0 when none). */
function value(samples: Sample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

interface Answer {
  status: number;
  type: string;
  body: string;
}

/** A GET from a chosen loopback address (Linux routes all of 127.0.0.0/8 to lo). */
function get(port: number, path: string, from = '127.0.0.1', headers: Record<string, string> = {}): Promise<Answer> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, localAddress: from, headers }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body }));
      })
      .on('error', reject);
  });
}

const { log, lines } = logLines();

// The scraper's network is 127.0.0.2 only: the test reaches the service from 127.0.0.2 to scrape and from
// 127.0.0.1 to be refused.
const SCRAPER = '127.0.0.2';
const { sink, svc } = await deliveryWorld(t, {
  env: { SVC_METRICS_PORT: '0', SVC_METRICS_CIDRS: `${SCRAPER}/32` },
  webhooks: { pollMs: 20 },
  log,
});
const httpPort = Number(new URL(svc.url).port);
const scrape = async (port = httpPort) => {
  const res = await get(port, '/metrics', SCRAPER);
  if (res.status !== 200) throw new Error(`GET /metrics: ${res.status} ${res.body}`);
  return parseProm(res.body);
};

t.test('SVC_METRICS_CIDRS defaults to loopback only', async (t) => {
  t.same(loadConfig({}).metricsCidrs, ['127.0.0.1/8', '::1']);
  t.equal(loadConfig({}).metricsPort, null, 'no metrics listener unless SVC_METRICS_PORT is set');
});

t.test('a delivery moves the counters; the queue empties again', async (t) => {
  const s = await sender(svc);
  const before = await scrape();
  const res = await get(httpPort, '/metrics', SCRAPER);
  t.match(res.type, /^text\/plain; version=0\.0\.4/, 'the Prometheus text format');
  for (const name of [
    'svc_outbound_queue_messages',
    'svc_webhook_backlog',
    'svc_webhook_backlog_due',
    'svc_mx_connections',
    'svc_imap_connections',
  ])
    t.ok(
      before.some((x) => x.name === name),
      `${name} is exposed`,
    );
  t.ok(
    before.some((x) => x.name === 'svc_http_request_duration_seconds_bucket'),
    'the latency histogram has its buckets',
  );
  const sent = (o: Sample[]) => value(o, 'svc_http_requests_total', { route: 'v1.services.sendEmail', status: '200' });
  const delivered = (o: Sample[]) =>
    value(o, 'svc_delivery_attempts_total', { outcome: 'delivered', source: 'default' });

  const { providerMessageId } = await s.key.v1.services.sendEmail({
    from: `app@${s.domain}`,
    to: 'someone@dest.test',
    subject: 'metrics',
    text: 'hello',
  });
  await sink.waitForMessages(1);
  const after = await waitFor(
    async () => {
      const o = await scrape();
      return delivered(o) === delivered(before) + 1 && value(o, 'svc_outbound_queue_messages') === 0 ? o : null;
    },
    { what: 'the delivered attempt counted and the spool empty' },
  );
  t.equal(delivered(after), delivered(before) + 1, 'svc_delivery_attempts_total{outcome="delivered"} +1');
  t.equal(sent(after), sent(before) + 1, 'svc_http_requests_total{route="v1.services.sendEmail",status="200"} +1');
  t.equal(value(after, 'svc_outbound_queue_depth'), 0, 'no domain has anything queued');
  t.equal(value(after, 'svc_outbound_queue_depth', { domain: 'dest.test' }), 0);
  t.equal(value(after, 'svc_dkim_signing_failures_total'), 0, 'no signing failure');
  t.ok(
    value(after, 'svc_http_request_duration_seconds_count', { route: 'v1.services.sendEmail' }) >= 1,
    'the sendEmail latency was observed',
  );

  // The waits of the sendEmail: one request, one of each step; each a positive time, in a bucket.
  const waits = (o: Sample[], step: string, what = 'count') => value(o, `svc_request_wait_seconds_${what}`, { step });
  for (const step of ['guard', 'spool', 'accept']) {
    t.equal(waits(after, step), waits(before, step) + 1, `svc_request_wait_seconds{step="${step}"} counted once`);
    t.ok(waits(after, step, 'sum') > waits(before, step, 'sum'), `${step}: its wait added to the sum`);
  }
  t.equal(
    value(after, 'svc_request_wait_seconds_bucket', { step: 'spool', le: '+Inf' }),
    waits(after, 'spool'),
    'every spool wait is in the +Inf bucket',
  );

  // A sendBatch waits once a step for all its messages: one guard, one synced write, one statement.
  await s.key.v1.services.sendBatch({
    messages: [1, 2].map((n) => ({ from: `app@${s.domain}`, to: `batch-${n}@dest.test`, subject: 'b', text: 'b' })),
  });
  const batched = await scrape();
  for (const step of ['guard', 'spool', 'accept'])
    t.equal(waits(batched, step), waits(after, step) + 1, `a sendBatch of two: ${step} counted once`);

  // The delivery attempt's info line, as Postfix's status=sent.
  const line = lines.find((l) => l.msg === 'delivery attempt' && l.messageId === providerMessageId);
  t.ok(line, 'one line for the attempt');
  t.equal(lines.filter((l) => l.msg === 'delivery attempt' && l.messageId === providerMessageId).length, 1);
  // The sink offers STARTTLS (test/helpers/smtp-sink.ts), so the attempt ran over TLS.
  t.match(line, {
    level: 30,
    domain: 'dest.test',
    recipient: 'someone@dest.test',
    mx: 'mx.dest.test',
    ip: '127.0.0.1',
    tls: 'TLSv1.3',
    reply: 250,
    outcome: 'delivered',
    attempt: 1,
    source: null,
  });
  t.type(line?.delayMs, 'number', 'the delay since the message was accepted');

  // The access line of the sendEmail request.
  const access = lines.find((l) => l.msg === 'http request' && l.route === 'v1.services.sendEmail');
  t.match(access, { level: 30, method: 'POST', status: 200, ip: '127.0.0.1' });
  t.type(access?.requestId, 'string', 'the request id the client got in X-Request-Id');
  t.type(access?.durationMs, 'number');
});

t.test('the MTA listener on SVC_METRICS_PORT answers too', async (t) => {
  const port = svc.running.ports.metrics;
  t.ok(port, 'bound');
  const o = await scrape(port);
  t.ok(
    o.some((x) => x.name === 'svc_delivery_attempts_total'),
    'the MTA counters',
  );
  t.equal((await get(port!, '/metrics', '127.0.0.1')).status, 404, 'refused outside SVC_METRICS_CIDRS');
  t.equal((await get(port!, '/other', SCRAPER)).status, 404, 'only /metrics');
});

t.test('/metrics outside SVC_METRICS_CIDRS, or through an unknown proxy, is an unknown route', async (t) => {
  const refused = await get(httpPort, '/metrics', '127.0.0.1');
  t.equal(refused.status, 404);
  t.equal((JSON.parse(refused.body) as { error: { code: string } }).error.code, 'not_found', 'the 404 envelope');
  t.notMatch(refused.body, /svc_/, 'no metric in it');
  const proxied = await get(httpPort, '/metrics', SCRAPER, { 'X-Forwarded-For': '203.0.113.9' });
  t.equal(proxied.status, 404, 'forwarded by a proxy SVC_TRUSTED_PROXIES does not name');
  const o = await scrape();
  t.ok(value(o, 'svc_http_requests_total', { route: 'unmatched', status: '404' }) >= 2, 'counted as unmatched');
});

t.test('GET /ready answers 200 when the database and the spool answer', async (t) => {
  const res = await get(httpPort, '/ready', '127.0.0.1');
  t.equal(res.status, 200);
  t.same(JSON.parse(res.body), { ok: true });
  const o = await scrape();
  t.ok(value(o, 'svc_http_requests_total', { route: 'ready', status: '200' }) >= 1, 'counted under its name');
});

t.test('GET /ready answers 503 when the database does not answer in time', async (t) => {
  // The embedded database is one connection: a transaction held open (its lock) keeps /ready's SELECT 1 waiting,
  // as a database that stopped answering would. Run on the embedded database only.
  const other = await startTestService(t, { env: { SVC_DATABASE_URL: '' } });
  let release!: () => void;
  const busy = other.running.storage.db.tx(async (q) => {
    await q.query('SELECT 1');
    await new Promise<void>((r) => (release = r));
  });
  await waitFor(() => release, { what: 'the transaction holding the database' });
  const started = Date.now();
  const res = await fetch(`${other.url}/ready`);
  t.equal(res.status, 503);
  t.same(await res.json(), { ok: false, error: 'the database does not answer' }, 'the reason, not the error');
  t.ok(Date.now() - started < READY_DB_TIMEOUT_MS + 900, 'answered at the timeout, not when the database was');
  release();
  await busy;
  t.equal((await fetch(`${other.url}/ready`)).status, 200, 'ready again once it answers');
});

t.test('two services in one process count apart', async (t) => {
  const other = await startTestService(t, { env: { SVC_METRICS_CIDRS: SCRAPER } });
  const res = await get(Number(new URL(other.url).port), '/metrics', SCRAPER);
  t.equal(res.status, 200);
  const o = parseProm(res.body);
  t.equal(value(o, 'svc_http_requests_total', { route: 'v1.services.sendEmail' }), 0, 'none of the first one');
  t.notOk(
    o.some((x) => x.name === 'svc_delivery_attempts_total'),
    'no MTA in this one',
  );
});
