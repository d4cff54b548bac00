import t from 'tap';
import { startTestService } from '../helpers/service.js';

t.test('signup, whoami and logout through the SDK', async (t) => {
  const svc = await startTestService(t);
  const me = await svc.signup();
  const who = await me.client.v1.services.whoami();
  t.same(who, { principal: 'account_token', userId: me.userId, role: 'customer', organizations: [] });
  t.same(await me.client.auth.logout(), { ok: true });
  await t.rejects(me.client.v1.services.whoami(), { status: 401, code: 'unauthorized' });
});
