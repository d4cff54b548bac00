// `svc dev` and `svc api` as a developer runs them (docs/development.md): the development mode in a child
// process on a fresh data directory, its printed key used by `svc api` and by the SDK, the messages caught
// by its sink read back with `svc dev messages` and over /dev/messages, their DKIM signatures verified by
// python3-dkim against the key the development DNS zone publishes; and the refusals.
import t, { type Test } from 'tap';
import { promises as dns } from 'node:dns';
import { createClient } from '@svc-mail/sdk';
import { waitFor } from '../helpers/wait-for.js';
import { databaseEnv, exitWithin, stderrLines, svc, tempDir, type Svc } from '../helpers/child.js';
import { verifyDkim } from '../helpers/dkim-verify.js';
import { remoteDatabaseHost } from '../../bin/dev.js';

interface Ready {
  exports: Record<string, string>;
  uiUrl: string;
  zone: string;
}

/** Waits for the ready banner of `svc dev` and reads it: the export lines, the pages' URL, the zone. */
async function ready(s: Svc): Promise<Ready> {
  const out = await waitFor(
    () => {
      if (s.exit) throw new Error(`svc dev exited ${JSON.stringify(s.exit)}:\n${s.stdout()}\n${s.stderr()}`);
      return s.stdout().includes('export SVC_PLATFORM_ADMIN_KEY=') ? s.stdout() : null;
    },
    { timeoutMs: 120_000, what: 'the ready banner of svc dev' },
  );
  const exports = Object.fromEntries([...out.matchAll(/^export (SVC_\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
  const uiUrl = /caught mail\s+(http:\/\/\S+\/dev\/messages)/.exec(out)?.[1];
  const zone = /DNS zone\s+(127\.0\.0\.1:\d+)/.exec(out)?.[1];
  if (!uiUrl || !zone) throw new Error(`unreadable banner:\n${out}`);
  return { exports, uiUrl, zone };
}

/** Runs a short `svc` command to its end. */
async function run(t: Test, args: string[], env: Record<string, string>) {
  const s = svc(t, args, env);
  const exit = await exitWithin(s, `svc ${args.join(' ')}`);
  return { code: exit.code, stdout: s.stdout(), stderr: s.stderr() };
}

const devEnv = (dataDir: string) => ({
  SVC_DATA_DIR: dataDir,
  SVC_HTTP_PORT: '0',
  SVC_SMTP_PORT: '0',
  SVC_IMAP_PORT: '0',
});

interface Listed {
  id: string;
  subject: string;
  rcptTo: string[];
}

t.test('svc dev: a ready key, mail sent with svc api and the SDK is caught, DKIM-signed, listed', async (t) => {
  const dataDir = await tempDir(t);
  // A database the child creates and migrates itself, as `npm run dev` meets it on a new machine (not migratedIn).
  const env = { ...devEnv(dataDir), ...(await databaseEnv(t)) };
  const s = svc(t, ['dev', '--ui-port', '0'], env);
  const { exports, uiUrl, zone } = await ready(s);
  t.match(exports.SVC_API_KEY_ID, /^tk_/, 'a project API key is printed');
  t.ok(exports.SVC_API_KEY_SECRET, 'with its secret');
  t.ok((exports.SVC_PLATFORM_ADMIN_KEY ?? '').length >= 16, 'and a platform key');
  t.match(s.stdout(), /Next: npm run svc -- api POST \/v1\/services\/sendEmail '\{"from":"hello@dev\.test"/);
  const apiEnv = {
    SVC_API_URL: exports.SVC_API_URL!,
    SVC_API_KEY_ID: exports.SVC_API_KEY_ID!,
    SVC_API_KEY_SECRET: exports.SVC_API_KEY_SECRET!,
  };

  const whoami = await run(t, ['api', 'GET', '/v1/services/whoami'], apiEnv);
  t.equal(whoami.code, 0, `svc api GET whoami exits 0: ${whoami.stderr}`);
  t.ok(JSON.parse(whoami.stdout), 'prints JSON');
  t.match(whoami.stdout, /\n {2}"/, 'pretty');

  const subject = 'Shell <b>& "quotes"';
  const sent = await run(
    t,
    [
      'api',
      'POST',
      '/v1/services/sendEmail',
      JSON.stringify({ from: 'Dev <hello@dev.test>', to: 'someone@example.com', subject, text: 'From the shell.' }),
    ],
    apiEnv,
  );
  t.equal(sent.code, 0, `svc api POST sendEmail exits 0: ${sent.stdout}${sent.stderr}`);
  t.equal((JSON.parse(sent.stdout) as { status: string }).status, 'queued');

  const client = createClient({
    baseUrl: exports.SVC_API_URL!,
    credential: { keyId: apiEnv.SVC_API_KEY_ID, secret: apiEnv.SVC_API_KEY_SECRET },
  });
  const html = '<p>Hi <b>there</b></p><script>parent.pwned = 1</script>';
  await client.v1.services.sendEmail({
    from: 'hello@dev.test',
    to: 'reader@elsewhere.example',
    subject: 'From the SDK',
    text: 'Hi there',
    html,
  });

  const listed = await waitFor(
    async () => {
      const body = (await (await fetch(`${uiUrl}.json`)).json()) as { messages: Listed[] };
      return body.messages.length >= 2 ? body.messages : null;
    },
    { timeoutMs: 30_000, what: 'two caught messages' },
  );
  t.equal(listed.length, 2, 'exactly the two messages are caught');
  const shell = listed.find((m) => m.subject === subject)!;
  const sdk = listed.find((m) => m.subject === 'From the SDK')!;
  t.same(shell.rcptTo, ['someone@example.com'], 'the envelope recipient of the shell send');
  t.same(sdk.rcptTo, ['reader@elsewhere.example'], 'another domain: the catch-all MX');

  const list = await run(t, ['dev', 'messages'], { SVC_DATA_DIR: dataDir });
  t.equal(list.code, 0, 'svc dev messages exits 0');
  const lines = list.stdout.trim().split('\n');
  t.equal(lines.length, 2, 'one line a message');
  t.same(
    lines.map((l) => l.split('\t')[0]),
    listed.map((m) => m.id),
    'newest first, as on the page',
  );
  t.match(list.stdout, `${shell.id}\t`, 'the id first');
  t.match(list.stdout, /\tDev <hello@dev\.test>\tsomeone@example\.com\tShell <b>& "quotes"$/m, 'from, to, subject');

  const one = svc(t, ['dev', 'messages', sdk.id], { SVC_DATA_DIR: dataDir });
  const chunks: Buffer[] = [];
  one.child.stdout?.removeAllListeners('data');
  one.child.stdout?.setEncoding('latin1' as BufferEncoding);
  one.child.stdout?.on('data', (d: string) => chunks.push(Buffer.from(d, 'latin1')));
  t.equal((await exitWithin(one, 'svc dev messages <id>')).code, 0, 'svc dev messages <id> exits 0');
  const raw = Buffer.concat(chunks);
  const overHttp = Buffer.from(await (await fetch(`${uiUrl}/${sdk.id}/raw`)).arrayBuffer());
  t.ok(raw.equals(overHttp), 'svc dev messages <id> prints the message as caught, byte for byte');
  t.match(raw.toString('latin1'), /^DKIM-Signature: /m, 'signed');

  // The verifier asks the development zone for the key, as a receiver would ask the domain's DNS.
  const sig = /^DKIM-Signature:([\s\S]*?)\r\n(?![ \t])/m.exec(raw.toString('latin1'))![1]!.replace(/\s+/g, '');
  const selector = /(?:^|;)s=([^;]+)/.exec(sig)![1]!;
  const domain = /(?:^|;)d=([^;]+)/.exec(sig)![1]!;
  t.equal(domain, 'dev.test', 'd= is the sending domain');
  const resolver = new dns.Resolver();
  resolver.setServers([zone]);
  const name = `${selector}._domainkey.${domain}`;
  const txt = (await resolver.resolveTxt(name)).map((chunks) => chunks.join(''));
  t.equal(txt.length, 1, 'the zone publishes the DKIM key');
  const verified = await verifyDkim(raw, { [name]: txt[0]! });
  t.same(
    verified.signatures.map((x) => ({ d: x.domain, ok: x.ok, error: x.error })),
    [{ d: 'dev.test', ok: true, error: undefined }],
    'python3-dkim verifies the signature',
  );

  const listPage = await (await fetch(uiUrl)).text();
  t.match(listPage, `/dev/messages/${shell.id}`, 'the list links each message');
  t.match(listPage, 'Shell &lt;b&gt;&amp; &quot;quotes&quot;', 'the subject escaped');
  t.notMatch(listPage, '<b>&', 'never raw');
  const res = await fetch(`${uiUrl}/${sdk.id}`);
  t.match(res.headers.get('content-security-policy') ?? '', "default-src 'none'", 'a CSP that loads nothing');
  const page = await res.text();
  const frame = /<iframe sandbox="" [^>]*srcdoc="([^"]*)"/.exec(page);
  t.ok(frame, 'the HTML part in an iframe with an empty sandbox');
  t.match(frame?.[1] ?? '', '&lt;script&gt;parent.pwned', 'the HTML escaped into srcdoc');
  t.notMatch(page, '<script', 'no script element on the page itself');
  t.equal((await fetch(`${uiUrl}/..%2f..%2fdev%2fcredentials.json`)).status, 404, 'no path leaves the sink');

  // The same key from the platform key side, and a bad key: the error envelope, exit 1.
  const admin = await run(t, ['api', 'GET', '/v1/services/whoami'], {
    SVC_API_URL: apiEnv.SVC_API_URL,
    SVC_PLATFORM_ADMIN_KEY: exports.SVC_PLATFORM_ADMIN_KEY!,
  });
  t.equal(admin.code, 0, `the platform key works too: ${admin.stdout}`);
  const bad = await run(t, ['api', 'GET', '/v1/services/whoami'], { ...apiEnv, SVC_API_KEY_SECRET: 'not-the-secret' });
  t.equal(bad.code, 1, 'a bad key exits 1');
  const envelope = JSON.parse(bad.stdout) as { error: { code: string; message: string } };
  t.equal(envelope.error.code, 'unauthorized', 'and prints the error envelope');
  t.type(envelope.error.message, 'string');

  s.child.kill('SIGTERM');
  t.same(await exitWithin(s, 'svc dev after SIGTERM'), { code: 0, signal: null }, 'SIGTERM: exit 0');

  // Started again on the same data directory: the same key, and the caught mail is still there.
  const again = svc(t, ['dev', '--ui-port', '0'], env);
  const second = await ready(again);
  t.equal(second.exports.SVC_API_KEY_ID, exports.SVC_API_KEY_ID, 'the same API key');
  t.equal(second.exports.SVC_PLATFORM_ADMIN_KEY, exports.SVC_PLATFORM_ADMIN_KEY, 'the same platform key');
  const kept = (await (await fetch(`${second.uiUrl}.json`)).json()) as { messages: Listed[] };
  t.same(kept.messages.map((m) => m.id).sort(), [shell.id, sdk.id].sort(), 'caught mail survives a restart');
  again.child.kill('SIGTERM');
  t.same(await exitWithin(again, 'the second svc dev after SIGTERM'), { code: 0, signal: null });
});

t.test('svc dev refuses a database that is not on this machine', async (t) => {
  const dataDir = await tempDir(t);
  const s = svc(t, ['dev', '--ui-port', '0'], {
    ...devEnv(dataDir),
    SVC_DATABASE_URL: 'postgres://svc@db.example.com:5432/svc',
  });
  const exit = await exitWithin(s, 'svc dev with a remote database');
  t.equal(exit.code, 2, 'exit 2');
  const lines = stderrLines(s);
  t.equal(lines.length, 1, `one line: ${s.stderr()}`);
  t.match(lines[0], /SVC_DATABASE_URL/, 'names SVC_DATABASE_URL');
  t.match(lines[0], /db\.example\.com/, 'and the host');
  t.notMatch(s.stdout(), /ready/, 'nothing started');
});

t.test('remoteDatabaseHost: what counts as this machine', async (t) => {
  const cases: [string, string | null, NodeJS.ProcessEnv?][] = [
    ['postgres://postgres@127.0.0.1:5432/x', null],
    ['postgres://postgres@localhost/x', null],
    ['postgres://postgres@[::1]:5432/x', null],
    ['postgresql:///x?host=/var/run/postgresql', null],
    ['postgres:///x', null, {}],
    ['postgres:///x', 'db.internal', { PGHOST: 'db.internal' }],
    ['postgres://u@10.0.0.5/x', '10.0.0.5'],
    ['postgres://u@127.0.0.1/x?host=db.example.com', 'db.example.com'],
    ['postgres://u@db.example.com/x', 'db.example.com'],
  ];
  for (const [url, want, env] of cases) t.equal(remoteDatabaseHost(url, env ?? {}), want, url);
});

t.test('svc api: usage errors exit 2 without a request', async (t) => {
  const noKey = await run(t, ['api', 'GET', '/v1/services/whoami'], { SVC_API_URL: 'http://127.0.0.1:9' });
  t.equal(noKey.code, 2, 'no credential: exit 2');
  t.match(noKey.stderr, /SVC_API_KEY_ID/);
  const badJson = await run(t, ['api', 'POST', '/v1/services/sendEmail', '{not json'], {
    SVC_API_URL: 'http://127.0.0.1:9',
    SVC_PLATFORM_ADMIN_KEY: 'x'.repeat(20),
  });
  t.equal(badJson.code, 2, 'a body that is not JSON: exit 2');
  const down = await run(t, ['api', 'GET', '/v1/services/whoami'], {
    SVC_API_URL: 'http://127.0.0.1:9',
    SVC_PLATFORM_ADMIN_KEY: 'x'.repeat(20),
  });
  t.equal(down.code, 1, 'a server that does not answer: exit 1');
  t.match(down.stderr, /did not answer/);
});
