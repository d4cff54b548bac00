// The pure parts of webhooks: Standard Webhooks signing against the specification's published test
// vector, the retry schedule (backoff, jitter bounds, the 24 h window), and which addresses and URLs
// a webhook may aim at.
import t from 'tap';
import { newWebhookSecret, signWebhook, webhookHeaders } from '../../mail/webhook-sign.js';
import { nextWebhookAttempt, WEBHOOK_RETRY } from '../../mta/webhooks/retry.js';
import { checkWebhookUrl, refusalOf } from '../../mail/webhook-target.js';
import { verifyStandardWebhook } from '../helpers/webhook-receiver.js';
import { WEBHOOK_EVENTS } from '@svc-mail/sdk';
import { WEBHOOK_EVENT_TYPES } from '../../storage/pg/webhooks.js';

t.test('signing: the Standard Webhooks test vector, and the receiver of these tests agrees', async (t) => {
  // https://github.com/standard-webhooks/standard-webhooks (spec.md and every library's tests).
  const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
  const id = 'msg_p5jXN8AQM9LWM0D4loKWxJek';
  const body = '{"test": 2432232314}';
  const expected = 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=';
  t.equal(signWebhook(secret, id, 1614265330, body), expected);
  t.ok(
    verifyStandardWebhook(secret, id, '1614265330', body, expected),
    "the test receiver's own implementation accepts the vector",
  );
  t.notOk(verifyStandardWebhook(secret, id, '1614265331', body, expected), 'and refuses another timestamp');
  t.ok(
    verifyStandardWebhook(secret, id, '1614265330', body, `v1,bm90LWl0 ${expected}`),
    'any of several signatures may match',
  );

  const fresh = newWebhookSecret();
  t.match(fresh, /^whsec_[A-Za-z0-9+/]+=*$/);
  t.equal(Buffer.from(fresh.slice(6), 'base64').length, 32, '32 random bytes');
  t.not(newWebhookSecret(), fresh);
  const h = webhookHeaders(fresh, 'msg_x', 1700000000, '{}');
  t.same(Object.keys(h).sort(), ['content-type', 'webhook-id', 'webhook-signature', 'webhook-timestamp']);
  t.ok(verifyStandardWebhook(fresh, 'msg_x', h['webhook-timestamp']!, '{}', h['webhook-signature']!));
  t.same([...WEBHOOK_EVENTS], [...WEBHOOK_EVENT_TYPES], 'the route schema and the fan-out know the same kinds');
});

t.test(
  'retry schedule: full jitter under a doubling ceiling, never under 1 s, given up 24 h after the event',
  async (t) => {
    const event = 1_000_000;
    const HOUR = 3_600_000;
    // The ceiling doubles from 5 s and stops at the cap.
    for (const [attempt, ceiling] of [
      [1, 5_000],
      [2, 10_000],
      [5, 80_000],
      [12, 10_240_000],
      [13, 4 * HOUR],
      [40, 4 * HOUR],
    ] as const) {
      const top = nextWebhookAttempt(attempt, event, event, 0.999999);
      t.ok(
        top.action === 'retry' && top.atMs - event <= ceiling && top.atMs - event > ceiling * 0.99,
        `attempt ${attempt}: at most ${ceiling} ms`,
      );
      const low = nextWebhookAttempt(attempt, event, event, 0);
      t.same(low, { action: 'retry', atMs: event + 1_000 }, `attempt ${attempt}: a zero draw still waits 1 s`);
    }
    // Near the end of the window the next attempt is at its mark; at or past it, none.
    t.same(nextWebhookAttempt(30, event, event + 23 * HOUR, 0.9), { action: 'retry', atMs: event + 24 * HOUR });
    t.same(nextWebhookAttempt(30, event, event + 24 * HOUR, 0.5), { action: 'give_up' });
    t.same(nextWebhookAttempt(2, event, event + 25 * HOUR, 0.5), { action: 'give_up' });

    // A whole run, with median draws: exponential at first, then about every 2 h, ending at 24 h.
    let now = event;
    let attempt = 1;
    const times: number[] = [];
    for (;;) {
      const next = nextWebhookAttempt(attempt, event, now, 0.5);
      if (next.action === 'give_up') break;
      now = next.atMs;
      attempt++;
      times.push(now - event);
    }
    t.equal(times.at(-1), WEBHOOK_RETRY.windowMs, 'the last attempt is 24 h after the event');
    t.ok(attempt > 10 && attempt < 30, `${attempt} attempts in all`);
  },
);

t.test('addresses webhooks may not reach', async (t) => {
  const refused: Record<string, string> = {
    '127.0.0.1': 'loopback',
    '127.8.9.10': 'loopback',
    '10.0.0.1': 'private',
    '172.16.5.4': 'private',
    '192.168.1.1': 'private',
    '100.64.0.1': 'shared (CGNAT)',
    '169.254.169.254': 'link-local',
    '0.0.0.0': 'unspecified',
    '224.0.0.251': 'multicast',
    '255.255.255.255': 'reserved',
    '198.18.0.1': 'benchmarking',
    '192.0.2.1': 'documentation',
    '::': 'unspecified',
    '::1': 'loopback',
    'fe80::1': 'link-local',
    'fd12:3456::1': 'unique local',
    'fc00::1': 'unique local',
    'ff02::1': 'multicast',
    '::ffff:127.0.0.1': 'loopback',
    '::ffff:a00:1': 'private',
    '64:ff9b::a9fe:a9fe': 'link-local',
    '2002:c0a8:101::1': 'private',
    '2001:db8::1': 'documentation',
    '2001:0:4136:e378:8000:63bf:3fff:fdd2': 'tunnel', // a Teredo address (RFC 4380 §4)
    '2001:2::1': 'benchmarking',
    '2001:10::1': 'reserved',
    '3fff::1': 'documentation',
    '5f00::1': 'reserved',
  };
  for (const [address, why] of Object.entries(refused)) t.equal(refusalOf(address), why, `${address}: ${why}`);
  for (const address of [
    '8.8.8.8',
    '1.1.1.1',
    '100.128.0.1',
    '172.32.0.1',
    '192.169.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    '2a00:1450::1',
    '2001:4860:4860::8888', // in 2001::/16 but outside every special block
    '2001:200::1',
  ]) {
    t.equal(refusalOf(address), null, `${address}: public`);
  }
});

t.test('URLs at registration', async (t) => {
  const bad: [string, RegExp][] = [
    ['ftp://example.com/x', /http or https/],
    ['javascript:alert(1)', /http or https/],
    ['/relative/path', /absolute/],
    ['https://user:pass@example.com/hook', /user name or password/],
    ['http://127.0.0.1:8080/hook', /127\.0\.0\.1 \(loopback\)/],
    ['http://2130706433/', /127\.0\.0\.1 \(loopback\)/],
    ['http://0x7f.0.0.1/', /loopback/],
    ['http://[::1]/', /::1 \(loopback\)/],
    ['http://[::ffff:127.0.0.1]/', /loopback/],
    ['http://10.1.2.3/', /private/],
    ['http://169.254.169.254/latest/meta-data/', /link-local/],
    ['http://100.100.1.1/', /CGNAT/],
    ['http://[fd00::1]/', /unique local/],
    ['http://0.0.0.0/', /unspecified/],
    ['http://localhost:3000/', /localhost \(loopback\)/],
    ['http://api.LOCALHOST./', /loopback/],
  ];
  for (const [url, why] of bad) {
    const c = checkWebhookUrl(url, false);
    t.ok(!c.ok && why.test(c.message), `${url} refused: ${c.ok ? 'accepted' : c.message}`);
  }
  for (const url of [
    'https://hooks.example.com/svc',
    'http://93.184.216.34:8080/x?y=1',
    'https://[2606:4700::1]/h',
    'http://intranet/',
  ]) {
    t.ok(checkWebhookUrl(url, false).ok, `${url} accepted (a name is checked when it is resolved, at delivery)`);
  }
  t.ok(checkWebhookUrl('http://127.0.0.1:8080/hook', true).ok, 'SVC_ALLOW_PRIVATE_WEBHOOKS=1 lifts the address rule');
  t.notOk(checkWebhookUrl('ftp://127.0.0.1/', true).ok, 'but not the scheme rule');
});
