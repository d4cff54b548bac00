// docs/api.md §5.5 roles as served by the public roles route, and the router's literal-before-parameter order.
import t from 'tap';
import { startTestService } from '../helpers/service.js';
import { byPathSpecificity } from '../../control/app.js';

t.test('GET /console/v1/organizations/roles is public and lists §5.5 exactly', async (t) => {
  const svc = await startTestService(t);
  const res = await fetch(`${svc.url}/console/v1/organizations/roles`);
  t.equal(res.status, 200, 'unsigned request accepted');
  const body = (await res.json()) as { roles: { role: string; permissions: string[] }[]; permissions: string[] };
  const all = [
    'org:manage',
    'billing:manage',
    'members:manage',
    'tokens:manage',
    'domains:manage',
    'projects:manage',
    'apikeys:manage',
  ];
  t.same([...body.permissions].sort(), [...all].sort());
  const of = (role: string) => [...(body.roles.find((r) => r.role === role)?.permissions ?? ['missing'])].sort();
  t.same(
    body.roles.map((r) => r.role),
    ['owner', 'admin', 'member', 'auditor', 'billing'],
  );
  t.same(of('owner'), [...all].sort(), 'owner has everything');
  t.same(of('admin'), all.filter((p) => p !== 'billing:manage').sort(), 'admin lacks only billing:manage');
  t.same(of('member'), ['apikeys:manage', 'domains:manage', 'projects:manage'], 'member: projects, keys, domains');
  t.same(of('auditor'), [], 'auditor is read only');
  t.same(of('billing'), ['billing:manage'], 'billing has only billing:manage');
});

t.test('literal path segments are registered before parameters', async (t) => {
  const paths = ['/x/v1/orgs/{id}', '/x/v1/orgs/roles', '/x/v1/orgs/{id}/tokens', '/x/v1/orgs/join', '/x/v1/orgs'];
  t.same([...paths].sort(byPathSpecificity), [
    '/x/v1/orgs',
    '/x/v1/orgs/join',
    '/x/v1/orgs/roles',
    '/x/v1/orgs/{id}',
    '/x/v1/orgs/{id}/tokens',
  ]);
});
