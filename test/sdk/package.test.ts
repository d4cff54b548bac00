// @svc-mail/sdk as its users get it: `npm pack` in sdk/ (prepack builds dist/), the tarball installed
// with npm into a fresh directory outside the repository, and a plain Node script there (no hooks, no
// TypeScript) that signs up, creates an organization and asks who it is, against the running service.
// Also: the package's source imports nothing but itself and TypeBox, so that it runs in a browser.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { startTestService, uniqueEmail } from '../helpers/service.js';

const run = promisify(execFile);
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const SDK = path.join(ROOT, 'sdk');

async function sourceFiles(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await sourceFiles(p)));
    else if (e.name.endsWith('.ts')) out.push(p);
  }
  return out;
}

t.test('the source imports only itself and @sinclair/typebox', async (t) => {
  const files = await sourceFiles(path.join(SDK, 'src'));
  t.ok(files.length > 10, 'found the sources');
  for (const f of files) {
    const text = await readFile(f, 'utf8');
    const specifiers = [...text.matchAll(/^\s*(?:import|export)\b[^'";]*?from\s*'([^']+)'/gm)].map((m) => m[1]!);
    const dynamic = [...text.matchAll(/\bimport\(\s*'([^']+)'/g)].map((m) => m[1]!);
    for (const s of [...specifiers, ...dynamic]) {
      const inside = s.startsWith('./') || (s.startsWith('../') && path.resolve(path.dirname(f), s).startsWith(SDK));
      t.ok(inside || s === '@sinclair/typebox', `${path.relative(ROOT, f)}: ${s}`);
    }
    t.notMatch(text, /\b(Buffer|process|require)\b\s*[.(]/, `${path.relative(ROOT, f)} uses no Node global`);
  }
});

// The consumer: what a customer would write, in plain JavaScript.
const SCRIPT = `
import { createClient, SvcError, routeTable } from '@svc-mail/sdk';
const [baseUrl, email] = process.argv.slice(2);
const { user, accountToken } = await createClient({ baseUrl }).auth.signup({ email, password: 'a packed password' });
const me = createClient({ baseUrl, credential: { keyId: accountToken.tokenId, secret: accountToken.secret } });
const { organization } = await me.console.organizations.create({ name: 'Packed SDK' });
const whoami = await me.v1.services.whoami();
const error = await me.console.accountTokens.delete({ id: 'no-such-token' }).catch((e) => e);
console.log(JSON.stringify({
  userId: user.id,
  organizationId: organization.id,
  whoami,
  error: { isSvcError: error instanceof SvcError, status: error.status, code: error.code },
  routes: Object.keys(routeTable).length,
}));
`;

// A TypeScript user of the declarations, in a browser's setting (lib DOM, no Node types, no skipLibCheck).
const TYPED = `
import { createClient, signHeaders } from '@svc-mail/sdk';
const client = createClient({ baseUrl: 'http://127.0.0.1:1' });
export const signUp = async () => {
  const { accountToken } = await client.auth.signup({ email: 'a@example.test', password: 'long enough' });
  // @ts-expect-error: the declarations know the answer's shape
  accountToken.notAField;
  const signed = { method: 'GET', target: '/', body: '', keyId: 'k', secret: 's' };
  const headers: Record<string, string> = await signHeaders(signed);
  return [accountToken.tokenId, headers];
};
`;
const TSCONFIG = {
  compilerOptions: {
    noEmit: true,
    strict: true,
    module: 'nodenext',
    moduleResolution: 'nodenext',
    target: 'es2022',
    lib: ['es2022', 'dom'],
    types: [],
  },
  files: ['typed.ts'],
};

t.test('npm pack, npm install outside the repository, a plain .mjs script against the service', async (t) => {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-sdk-consumer-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const npm = (args: string[], cwd: string) => run('npm', [...args, '--no-audit', '--no-fund'], { cwd });

  const [svc] = await Promise.all([
    startTestService(t),
    npm(['pack', '--pack-destination', dir], SDK).then(async () => {
      const tarballs = (await readdir(dir)).filter((f) => f.endsWith('.tgz'));
      t.equal(tarballs.length, 1, `one tarball: ${tarballs.join(', ')}`);
      await writeFile(path.join(dir, 'package.json'), JSON.stringify({ name: 'sdk-consumer', private: true }));
      await npm(['install', '--prefer-offline', path.join(dir, tarballs[0]!)], dir);
    }),
  ]);
  const installed = JSON.parse(await readFile(path.join(dir, 'node_modules/@svc-mail/sdk/package.json'), 'utf8'));
  t.equal(installed.name, '@svc-mail/sdk');
  const shipped = (await readdir(path.join(dir, 'node_modules/@svc-mail/sdk/dist'))).sort();
  t.ok(shipped.includes('index.js') && shipped.includes('index.d.ts'), 'JavaScript and declarations are shipped');
  t.notOk(
    shipped.some((f) => f.endsWith('.ts') && !f.endsWith('.d.ts')),
    'no TypeScript source is shipped',
  );

  await writeFile(path.join(dir, 'typed.ts'), TYPED);
  await writeFile(path.join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
  const typed = await run(process.execPath, [tsc, '-p', '.'], { cwd: dir }).then(
    () => 'ok',
    (e: { stdout?: string }) => e.stdout ?? String(e),
  );
  t.equal(typed, 'ok', 'a TypeScript user type-checks against the declarations');

  await writeFile(path.join(dir, 'consumer.mjs'), SCRIPT);
  const email = uniqueEmail('packed');
  // A plain node: no --import hooks, and cwd outside the repository.
  const { stdout } = await run(process.execPath, ['consumer.mjs', svc.url, email], { cwd: dir });
  const out = JSON.parse(stdout);
  t.match(out.userId, /^[0-9a-f-]{36}$/, 'signed up');
  t.match(out.organizationId, /^[0-9a-f-]{36}$/, 'created an organization');
  t.equal(out.whoami.principal, 'account_token', 'whoami with the signed account token');
  t.equal(out.whoami.userId, out.userId, 'whoami names the user who signed up');
  t.same(
    out.whoami.organizations.map((o: { id: string }) => o.id),
    [out.organizationId],
    'whoami lists the new organization',
  );
  t.same(out.error, { isSvcError: true, status: 404, code: 'not_found' }, 'errors arrive as SvcError');
  t.equal(out.routes, Object.keys((await import('@svc-mail/sdk')).routeTable).length, 'the whole route table');
});
