// Two control-plane nodes on one Postgres: a nonce used on one node is refused by the other, and
// they share each credential's rate-limit bucket (docs/api.md §5.1 rule 2, docs/decisions.md #7).
import t from 'tap';
import { signHeaders } from '@svc-mail/sdk';
import { startTestService } from '../helpers/service.js';
import { testClock } from '../helpers/clock.js';

// Without SVC_DATABASE_URL the tests are skipped, not passed: two nodes need a shared real Postgres,
// which the SVC_DATABASE_URL pass of .ci/run provides.
const skip = process.env.SVC_DATABASE_URL ? false : 'two nodes need a shared real Postgres: set SVC_DATABASE_URL';

t.test('a request replayed against a second node is refused', { skip }, async (t) => {
  const clock = testClock();
  const a = await startTestService(t, { clock });
  const b = await startTestService(t, { clock, nodeOf: a });
  const me = await a.signup();
  const headers = await signHeaders({
    method: 'GET',
    target: '/v1/services/whoami',
    body: '',
    keyId: me.tokenId,
    secret: me.secret,
    timestamp: String(clock.now()),
  });

  const first = await fetch(`${a.url}/v1/services/whoami`, { headers });
  t.equal(first.status, 200, 'node A accepts the request');
  const replay = await fetch(`${b.url}/v1/services/whoami`, { headers });
  t.equal(replay.status, 401, 'node B refuses the same nonce');
  t.equal(((await replay.json()) as { error: { code: string } }).error.code, 'unauthorized');

  const fresh = await signHeaders({
    method: 'GET',
    target: '/v1/services/whoami',
    body: '',
    keyId: me.tokenId,
    secret: me.secret,
    timestamp: String(clock.now()),
  });
  t.equal(
    (await fetch(`${b.url}/v1/services/whoami`, { headers: fresh })).status,
    200,
    'node B accepts a fresh nonce of the same token',
  );
});

t.test('the rate-limit bucket is shared by the nodes', { skip }, async (t) => {
  const clock = testClock();
  clock.freeze();
  const a = await startTestService(t, { clock });
  const b = await startTestService(t, { clock, nodeOf: a });
  const me = await a.signup();
  const onA = a.client({ keyId: me.tokenId, secret: me.secret });
  const onB = b.client({ keyId: me.tokenId, secret: me.secret });
  // 100 burst: 60 on A and 40 on B use it up; the next on either node is refused.
  for (let i = 0; i < 60; i++) await onA.v1.services.whoami();
  for (let i = 0; i < 40; i++) await onB.v1.services.whoami();
  await t.rejects(onB.v1.services.whoami(), { status: 429, code: 'rate_limited' });
  await t.rejects(onA.v1.services.whoami(), { status: 429, code: 'rate_limited' });
});
