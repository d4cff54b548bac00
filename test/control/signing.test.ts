// docs/api.md §5 request signing, exercised with raw HTTP so every part of the string to sign can be bent:
// each of the five lines, the secret, the key id, the Authorization header, the ±5 min window and
// the single-use nonce. Every failure must be the same 401 `unauthorized` with the same message
// (the client is not told which part failed). Also the platform key of §5.3.
import t, { type Test } from 'tap';
import { randomUUID } from 'node:crypto';
import { adminHeaders, signHeaders } from '@svc-mail/sdk';
import { ADMIN_KEY, startTestService, type SignedUp, type TestService } from '../helpers/service.js';

const WHOAMI = '/v1/services/whoami';
const TOKENS = '/console/v1/account-tokens';
const SKEW = 5 * 60_000;

interface Res {
  status: number;
  headers: Headers;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
}

async function send(
  svc: TestService,
  method: string,
  target: string,
  headers: Record<string, string> | Promise<Record<string, string>>,
  body?: string,
): Promise<Res> {
  const h: Record<string, string> = { ...(await headers) };
  if (body !== undefined) h['content-type'] = 'application/json';
  const res = await fetch(svc.url + target, { method, headers: h, body });
  const text = await res.text();
  let json: unknown;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = { unparsable: text };
  }
  return { status: res.status, headers: res.headers, body: json };
}

/** Headers for `method target body` signed by `me` at the service's clock (overridable). */
function signed(
  svc: TestService,
  me: SignedUp,
  method: string,
  target: string,
  body = '',
  over: { timestamp?: string; nonce?: string; secret?: string; keyId?: string } = {},
) {
  return signHeaders({
    method,
    target,
    body,
    keyId: over.keyId ?? me.tokenId,
    secret: over.secret ?? me.secret,
    timestamp: over.timestamp ?? String(svc.clock.now()),
    nonce: over.nonce ?? randomUUID(),
  });
}

type T = Test;

/** The one message every authentication failure carries, learned from an unsigned request. */
async function authFailureMessage(svc: TestService): Promise<string> {
  const res = await send(svc, 'GET', WHOAMI, {});
  if (res.status !== 401 || typeof res.body?.error?.message !== 'string') {
    throw new Error(`unsigned whoami: expected a 401 envelope, got ${res.status} ${JSON.stringify(res.body)}`);
  }
  return res.body.error.message;
}

function expect401(t: T, res: Res, message: string, what: string) {
  t.equal(res.status, 401, `${what}: status 401`);
  t.equal(res.body?.error?.code, 'unauthorized', `${what}: code unauthorized`);
  t.equal(res.body?.error?.message, message, `${what}: the same message as every other auth failure`);
  t.equal(res.body?.error?.details, undefined, `${what}: no details say which part failed`);
}

function expect200(t: T, res: Res, what: string) {
  t.equal(res.status, 200, `${what}: status 200${res.status === 200 ? '' : ` (got ${JSON.stringify(res.body)})`}`);
}

// One service for everything but the disabled platform key (starting one costs seconds); each
// group signs up its own user so that no group drains another's rate-limit bucket.
t.test('signed requests', async (t) => {
  const svc = await startTestService(t);

  t.test('each line of the string to sign, the secret, the key id and the headers', async (t) => {
    const me = await svc.signup();
    const other = await svc.signup();
    const msg = await authFailureMessage(svc);

    t.test('control: correctly signed GET and POST succeed', async (t) => {
      const res = await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI));
      expect200(t, res, 'GET whoami');
      t.equal(res.body.principal, 'account_token');
      t.equal(res.body.userId, me.userId);

      const body = JSON.stringify({ label: 'signed-post' });
      const post = await send(svc, 'POST', TOKENS, signed(svc, me, 'POST', TOKENS, body), body);
      expect200(t, post, 'POST account-tokens');
      t.equal(post.body.label, 'signed-post');

      const q = `${WHOAMI}?a=1&b=two`;
      expect200(t, await send(svc, 'GET', q, signed(svc, me, 'GET', q)), 'GET with the signed query string');
    });

    t.test('line 1: method', async (t) => {
      expect401(t, await send(svc, 'GET', WHOAMI, signed(svc, me, 'POST', WHOAMI)), msg, 'signed POST, sent GET');
      const body = JSON.stringify({ label: 'x' });
      expect401(
        t,
        await send(svc, 'POST', TOKENS, signed(svc, me, 'PUT', TOKENS, body), body),
        msg,
        'signed PUT, sent POST',
      );
    });

    t.test('line 2: request target', async (t) => {
      expect401(t, await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', TOKENS)), msg, 'signed another path');
      expect401(
        t,
        await send(svc, 'GET', `${WHOAMI}?a=2`, signed(svc, me, 'GET', `${WHOAMI}?a=1`)),
        msg,
        'query value altered after signing',
      );
      expect401(
        t,
        await send(svc, 'GET', `${WHOAMI}?a=1`, signed(svc, me, 'GET', WHOAMI)),
        msg,
        'query string added after signing',
      );
      expect401(
        t,
        await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', `${WHOAMI}?a=1`)),
        msg,
        'query string removed after signing',
      );
      expect401(
        t,
        await send(svc, 'GET', `${WHOAMI}?b=2&a=1`, signed(svc, me, 'GET', `${WHOAMI}?a=1&b=2`)),
        msg,
        'query reordered after signing',
      );
    });

    t.test('line 3: timestamp header differs from the signed one', async (t) => {
      const now = svc.clock.now();
      const h = await signed(svc, me, 'GET', WHOAMI, '', { timestamp: String(now) });
      // Both values are inside the window, so only the mismatch can reject it.
      expect401(
        t,
        await send(svc, 'GET', WHOAMI, { ...h, 'x-svc-timestamp': String(now + 1) }),
        msg,
        'timestamp +1 ms',
      );
    });

    t.test('line 4: nonce header differs from the signed one', async (t) => {
      const h = await signed(svc, me, 'GET', WHOAMI);
      expect401(t, await send(svc, 'GET', WHOAMI, { ...h, 'x-svc-nonce': randomUUID() }), msg, 'other nonce');
    });

    t.test('line 5: body altered after signing', async (t) => {
      const signedBody = JSON.stringify({ label: 'a' });
      const h = await signed(svc, me, 'POST', TOKENS, signedBody);
      expect401(t, await send(svc, 'POST', TOKENS, h, JSON.stringify({ label: 'b' })), msg, 'different body');
      const h2 = await signed(svc, me, 'POST', TOKENS, signedBody);
      expect401(
        t,
        await send(svc, 'POST', TOKENS, h2, JSON.stringify({ label: 'a' }, null, 1)),
        msg,
        'same JSON, other bytes',
      );
      const h3 = await signed(svc, me, 'POST', TOKENS, '');
      expect401(t, await send(svc, 'POST', TOKENS, h3, signedBody), msg, 'signed empty body, sent a body');
      // Nothing was minted by the rejected requests.
      const list = await me.client.console.accountTokens.list();
      t.notOk(
        list.tokens.some((x) => x.label === 'a' || x.label === 'b'),
        'no token minted by a rejected request',
      );
    });

    t.test('wrong secret', async (t) => {
      expect401(
        t,
        await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI, '', { secret: me.secret + 'x' })),
        msg,
        'secret with an extra char',
      );
      expect401(
        t,
        await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI, '', { secret: other.secret })),
        msg,
        "another user's secret",
      );
    });

    t.test('unknown key id', async (t) => {
      expect401(
        t,
        await send(
          svc,
          'GET',
          WHOAMI,
          signed(svc, me, 'GET', WHOAMI, '', { keyId: 'svca_' + randomUUID().replace(/-/g, '') }),
        ),
        msg,
        'unknown svca_ id',
      );
      expect401(
        t,
        await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI, '', { keyId: 'nope' })),
        msg,
        'id without a known prefix',
      );
      // Another user's key id with my secret.
      expect401(
        t,
        await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI, '', { keyId: other.tokenId })),
        msg,
        "another user's key id with my secret",
      );
    });

    t.test('malformed Authorization header', async (t) => {
      const good = await signed(svc, me, 'GET', WHOAMI);
      const sig = /Signature=([0-9a-f]+)/.exec(good.authorization ?? '')?.[1] ?? '';
      t.equal(sig.length, 64, 'the SDK signature is 64 hex chars');
      const bad: [string, string | undefined][] = [
        ['absent', undefined],
        ['empty', ''],
        ['other scheme', `AWS4-HMAC-SHA256 Credential=${me.tokenId}, Signature=${sig}`],
        ['Bearer', `Bearer ${me.secret}`],
        ['no Signature', `SVC-HMAC-SHA256 Credential=${me.tokenId}`],
        ['no Credential', `SVC-HMAC-SHA256 Signature=${sig}`],
        ['truncated signature', `SVC-HMAC-SHA256 Credential=${me.tokenId}, Signature=${sig.slice(0, 63)}`],
        ['non-hex signature', `SVC-HMAC-SHA256 Credential=${me.tokenId}, Signature=${'z'.repeat(64)}`],
        ['empty credential', `SVC-HMAC-SHA256 Credential=, Signature=${sig}`],
      ];
      for (const [what, value] of bad) {
        const h: Record<string, string> = { ...(await signed(svc, me, 'GET', WHOAMI)) };
        if (value === undefined) delete h.authorization;
        else h.authorization = value;
        expect401(t, await send(svc, 'GET', WHOAMI, h), msg, `Authorization ${what}`);
      }
    });

    t.test('missing timestamp or nonce header', async (t) => {
      const h1: Record<string, string> = { ...(await signed(svc, me, 'GET', WHOAMI)) };
      delete h1['x-svc-timestamp'];
      expect401(t, await send(svc, 'GET', WHOAMI, h1), msg, 'no X-SVC-Timestamp');
      const h2: Record<string, string> = { ...(await signed(svc, me, 'GET', WHOAMI)) };
      delete h2['x-svc-nonce'];
      expect401(t, await send(svc, 'GET', WHOAMI, h2), msg, 'no X-SVC-Nonce');
      const h3: Record<string, string> = { ...(await signed(svc, me, 'GET', WHOAMI)) };
      delete h3['x-svc-timestamp'];
      delete h3['x-svc-nonce'];
      expect401(t, await send(svc, 'GET', WHOAMI, h3), msg, 'neither');
    });

    t.test('the credential still works after all those failures', async (t) => {
      expect200(t, await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI)), 'control after failures');
    });
  });

  t.test('nonce is single use', async (t) => {
    const me = await svc.signup();
    const msg = await authFailureMessage(svc);

    t.test('replay of the same signed GET', async (t) => {
      const h = await signed(svc, me, 'GET', WHOAMI);
      expect200(t, await send(svc, 'GET', WHOAMI, h), 'first send');
      expect401(t, await send(svc, 'GET', WHOAMI, h), msg, 'second send');
    });

    t.test('replay of the same signed POST mints nothing', async (t) => {
      const body = JSON.stringify({ label: 'replayed' });
      const h = await signed(svc, me, 'POST', TOKENS, body);
      expect200(t, await send(svc, 'POST', TOKENS, h, body), 'first send');
      expect401(t, await send(svc, 'POST', TOKENS, h, body), msg, 'second send');
      const list = await me.client.console.accountTokens.list();
      t.equal(list.tokens.filter((x) => x.label === 'replayed').length, 1, 'exactly one token minted');
    });

    t.test('a used nonce in a new, correctly signed request', async (t) => {
      const nonce = randomUUID();
      expect200(t, await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI, '', { nonce })), 'first use');
      const q = `${WHOAMI}?again=1`;
      expect401(
        t,
        await send(svc, 'GET', q, signed(svc, me, 'GET', q, '', { nonce })),
        msg,
        'same nonce, other target',
      );
    });

    t.test('concurrent replays: exactly one wins', async (t) => {
      const h = await signed(svc, me, 'GET', WHOAMI);
      const results = await Promise.all(Array.from({ length: 8 }, () => send(svc, 'GET', WHOAMI, h)));
      t.equal(results.filter((r) => r.status === 200).length, 1, 'one 200');
      for (const r of results.filter((x) => x.status !== 200)) expect401(t, r, msg, 'concurrent replay');
    });

    t.test('replay after a restart', async (t) => {
      const h = await signed(svc, me, 'GET', WHOAMI);
      expect200(t, await send(svc, 'GET', WHOAMI, h), 'before restart');
      await svc.restart();
      expect401(t, await send(svc, 'GET', WHOAMI, h), msg, 'same request after restart');
      expect200(t, await send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI)), 'a fresh request after restart');
    });
  });

  t.test('platform key', async (t) => {
    const me = await svc.signup();
    const msg = await authFailureMessage(svc);

    const ok = await send(svc, 'GET', WHOAMI, adminHeaders(ADMIN_KEY));
    expect200(t, ok, 'platform key on whoami');
    t.same(ok.body, { principal: 'platform_admin' }, 'whoami says platform_admin');

    expect401(t, await send(svc, 'GET', WHOAMI, adminHeaders(ADMIN_KEY + 'x')), msg, 'wrong admin key');
    expect401(t, await send(svc, 'GET', WHOAMI, adminHeaders(ADMIN_KEY.slice(0, -1))), msg, 'admin key prefix');
    expect401(t, await send(svc, 'GET', WHOAMI, adminHeaders('')), msg, 'empty admin key');
    expect401(t, await send(svc, 'GET', WHOAMI, adminHeaders(me.secret)), msg, "a user's secret as admin key");
    expect401(
      t,
      await send(svc, 'GET', TOKENS, adminHeaders(ADMIN_KEY)),
      msg,
      'platform key on an account-token route',
    );

    const noKey: Record<string, string> = { ...adminHeaders(ADMIN_KEY) };
    delete noKey['x-svc-admin-key'];
    expect401(
      t,
      await send(svc, 'GET', WHOAMI, noKey),
      msg,
      'Credential=admin, Signature=bootstrap without X-SVC-Admin-Key',
    );

    const wrongSig = {
      ...adminHeaders(ADMIN_KEY),
      authorization: 'SVC-HMAC-SHA256 Credential=admin, Signature=bootstrapx',
    };
    expect401(t, await send(svc, 'GET', WHOAMI, wrongSig), msg, 'Signature other than bootstrap');
  });

  // Last: it freezes and moves the shared clock.
  t.test('timestamp window: ±5 minutes inclusive, frozen clock', async (t) => {
    const me = await svc.signup();
    const msg = await authFailureMessage(svc);
    const T0 = Date.now();
    svc.clock.freeze(T0);
    const at = (ts: number) => send(svc, 'GET', WHOAMI, signed(svc, me, 'GET', WHOAMI, '', { timestamp: String(ts) }));

    expect200(t, await at(T0), 'T');
    expect200(t, await at(T0 - SKEW), 'T-300000');
    expect200(t, await at(T0 + SKEW), 'T+300000');
    expect401(t, await at(T0 - SKEW - 1), msg, 'T-300001');
    expect401(t, await at(T0 + SKEW + 1), msg, 'T+300001');
    expect401(t, await at(T0 - 24 * 3600_000), msg, 'a day old');
    expect401(t, await at(0), msg, 'epoch 0');

    // The same boundary seen from the server side: a request signed at T is rejected once the
    // server clock is 5 min + 1 ms later, with a fresh nonce (so only the clock can reject it).
    const ts = svc.clock.now();
    svc.clock.advance(SKEW);
    expect200(t, await at(ts), 'server clock at T+5 min');
    svc.clock.advance(1);
    expect401(t, await at(ts), msg, 'server clock at T+5 min + 1 ms');
  });
});

t.test('platform key disabled (SVC_PLATFORM_ADMIN_KEY empty = unset)', async (t) => {
  const svc = await startTestService(t, { env: { SVC_PLATFORM_ADMIN_KEY: '' } });
  t.equal(svc.running.ctx.config.platformAdminKey, null, 'the key is unset');
  const msg = await authFailureMessage(svc);
  expect401(t, await send(svc, 'GET', WHOAMI, adminHeaders(ADMIN_KEY)), msg, 'the test key');
  expect401(t, await send(svc, 'GET', WHOAMI, adminHeaders('')), msg, 'an empty key');
  const noKey: Record<string, string> = { ...adminHeaders(ADMIN_KEY) };
  delete noKey['x-svc-admin-key'];
  expect401(t, await send(svc, 'GET', WHOAMI, noKey), msg, 'no X-SVC-Admin-Key header');
});
