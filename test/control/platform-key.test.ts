// The platform key (docs/api.md §5.3) under SVC_PLATFORM_ADMIN_CIDRS: it works only from the networks named
// (here 127.0.0.2, while the test also connects from 127.0.0.1), is refused elsewhere exactly like a wrong key,
// and every use and refusal is logged with the client address.
import t from 'tap';
import http from 'node:http';
import { adminHeaders } from '@svc-mail/sdk';
import { ADMIN_KEY, startTestService } from '../helpers/service.js';
import { logLines } from '../helpers/log-lines.js';

const { log, lines } = logLines();
const svc = await startTestService(t, {
  env: { SVC_PLATFORM_ADMIN_CIDRS: '127.0.0.2/32' },
  log,
});
const port = Number(new URL(svc.url).port);

const whoami = (from: string, key = ADMIN_KEY) =>
  new Promise<number>((resolve, reject) => {
    http
      .get(
        { host: '127.0.0.1', port, path: '/v1/services/whoami', localAddress: from, headers: adminHeaders(key) },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      )
      .on('error', reject);
  });

t.test('the platform key from its network, and from elsewhere', async (t) => {
  t.equal(await whoami('127.0.0.2'), 200, 'from 127.0.0.2: accepted');
  t.equal(await whoami('127.0.0.1'), 401, 'from 127.0.0.1: refused');
  t.equal(await whoami('127.0.0.1', 'a wrong key that is long enough'), 401, 'the same answer as a wrong key');
  t.ok(
    lines.some((l) => l.msg === 'platform key used' && l.ip === '127.0.0.2' && l.target === '/v1/services/whoami'),
    'the use is logged with the address',
  );
  t.ok(
    lines.some((l) => l.msg === 'platform key refused: outside its networks' && l.ip === '127.0.0.1'),
    'the refusal too',
  );
  t.notOk(JSON.stringify(lines).includes(ADMIN_KEY), 'the key itself never reaches the log');
});
