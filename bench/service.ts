// The service under test as a child process (`svc start`), so that it has a process of its own as
// Postfix has its own, while the load generator, the DNS zone and the sink's bookkeeping run in the
// bench process. Also: the tenants it sends for, and the sendEmail load.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startDnsZone } from '../test/helpers/dns-zone.js';
import { createClient, SvcError, type Client, type Credential } from '@svc-mail/sdk';
import { cpuSecondsOf, emptySpool, freePort, sleep } from './util.js';
import { closeIdle, leanFetch, leanSign, sharedBodyPrefix } from './lean-fetch.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const ADMIN_KEY = 'bench-platform-admin-key-0123456789';

export interface Child {
  url: string;
  /** The service's process id (the cluster's primary when it runs several workers). */
  pid: number;
  /** CPU time (user + system) the service's processes have used so far, in seconds. */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

/**
 * The service as config/'s systemd units run it: `node dist/bin/svc.js`, compiled by `npm run build` from this
 * checkout, once per bench process. Not as `npm start` runs it, from the sources: under tsx, whose transform named
 * every function by a helper call where the function was made, the closures of each request included (~2% of the
 * control's CPU in a profile of sendEmail alone; in four alternated pairs of `npm run bench:accept`, the compiled
 * service was ahead in three, by 7% at the median). The figures are of what operators run.
 */
let build: Promise<void> | undefined;
function built(): Promise<void> {
  build ??= new Promise((resolve, reject) => {
    const npm = spawn('npm', ['run', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    npm.once('error', reject);
    npm.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`npm run build exited with ${code}`))));
  });
  return build;
}

/**
 * Starts `svc start --role <role>` with `env` on top of the bench's own SVC_* settings, in a folder of its own
 * (crashFolder), where a crash leaves its core file. Its stop fails when the process ended other than with 0, and
 * then says what the folder holds.
 */
export async function startChild(
  role: 'all' | 'control' | 'mta',
  env: Record<string, string>,
  nodeFlags: string[] = [],
): Promise<Child> {
  const port = await freePort();
  // The mta role has no HTTP listener: it is up once its MX listener accepts connections.
  const smtpPort = role === 'mta' ? await freePort() : 0;
  await built();
  const folder = await crashFolder(role);
  // The flags config/'s systemd units run the service with (see README, Configuration).
  const child: ChildProcess = spawn(
    ...withCoreDumps(process.execPath, [
      ...nodeFlags,
      '--max-semi-space-size=32',
      path.join(ROOT, 'dist/bin/svc.js'),
      'start',
      '--role',
      role,
    ]),
    {
      cwd: folder.dir,
      env: {
        ...process.env,
        SVC_HTTP_PORT: String(port),
        SVC_SMTP_PORT: String(smtpPort),
        SVC_IMAP_PORT: '0',
        SVC_BIND_HOST: '127.0.0.1',
        SVC_HOSTNAME: 'mta.bench.test',
        SVC_PLATFORM_ADMIN_KEY: ADMIN_KEY,
        SVC_LOG_LEVEL: 'warn',
        // The bench's sinks are on loopback, which the MTA refuses otherwise.
        SVC_ALLOW_PRIVATE_MX: '1',
        ...env,
      },
      stdio: ['ignore', 'inherit', 'inherit'],
    },
  );
  // How the process ended, once it has: its exit code, or the signal that ended it (a crash, or a signal its handler
  // did not take).
  let ended: number | string | undefined;
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve((ended = code ?? signal ?? 'no code and no signal'))),
  );
  const url = `http://127.0.0.1:${port}`;
  let stopping: Promise<void> | undefined;
  for (let i = 0; ; i++) {
    // Ended while starting, by a code or by a signal: said at once, not after 30 s.
    if (ended !== undefined) throw new Error(`svc start --role ${role} exited with ${ended}${await folder.left()}`);
    const ok =
      role === 'mta'
        ? await connects(smtpPort)
        : await fetch(`${url}/health`).then(
            (r) => r.ok,
            () => false,
          );
    if (ok) break;
    if (i > 600) {
      // Not left running behind the error, holding its ports and database: no one would stop it.
      child.kill('SIGKILL');
      await exited;
      throw new Error(`svc start --role ${role} did not come up within 30 s${await folder.left()}`);
    }
    await sleep(50);
  }
  return {
    url,
    pid: child.pid!,
    // With SVC_WORKERS the service is the cluster's primary and its workers (bin/cluster.ts).
    cpuSeconds: () => cpuSecondsOf((p) => p.pid === child.pid || p.ppid === child.pid),
    // Once: a second SIGTERM would end a process that is draining (drains, then exits, and writes --cpu-prof), and
    // the folder is looked at once.
    stop: () =>
      (stopping ??= (async () => {
        if (ended === undefined) child.kill('SIGTERM');
        const code = await exited;
        const left = await folder.left();
        if (code !== 0) throw new Error(`svc start --role ${role} exited with ${code}${left}`);
      })()),
  };
}

/**
 * `command` and `args` as spawn() takes them, run with the soft limit of its core files raised to the hard one
 * (unlimited by default): a shell raises it, then execs the command, which keeps the shell's pid. Under a soft limit of
 * 0, which this machine's shells have, a crash left no core in its folder (docs/decisions.md #80).
 */
export function withCoreDumps(command: string, args: readonly string[]): [string, string[]] {
  return ['/bin/sh', ['-c', 'ulimit -c "$(ulimit -H -c)"; exec "$@"', 'sh', command, ...args]];
}

/**
 * A working directory for one service process, made in the temp folder: where the process leaves its core file if
 * it crashes (startChild raises its limit, withCoreDumps) with kernel.core_pattern a bare name ("core", the kernel's
 * default). The checkout's root cannot hold one: its core/ folder has that name. `left()`, once the process has ended,
 * removes the folder when it holds nothing and returns '', else keeps it and says what it holds (docs/decisions.md
 * #80: an MTA's SIGSEGV at its stop, cause not known).
 */
export async function crashFolder(role: string) {
  const dir = await mkdtemp(path.join(os.tmpdir(), `svc-cores-${role}-`));
  return {
    dir,
    async left(): Promise<string> {
      const files = await readdir(dir);
      if (files.length) return `; ${dir} holds ${files.join(', ')}`;
      await rm(dir, { recursive: true, force: true });
      return '';
    },
  };
}

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1', () => (socket.destroy(), resolve(true)));
    socket.once('error', () => resolve(false));
  });
}

export interface Tenant {
  domain: string;
  dkimTxt: Record<string, string>;
  keys: Credential[];
  /** The organization's template, when createTenants was given one's text. */
  templateId?: string;
}

/**
 * `orgs` payg organizations (a free one stops at 500 a day), each with one project, a verified sending
 * domain bench-<i>.test (pgbench's script finds its tenants by that name), `keysPerOrg` API keys and, given
 * `templateText`, a template of that text (TEMPLATE_VARIABLE its one variable).
 * Keys are many because each has its own rate limit (100 burst, 20/s): a fleet of senders, not one
 * sender over its limit. Each client takes turns over KEYS_PER_CLIENT keys: at one key per client,
 * 64 clients would be capped near 1,300 requests/s by the buckets alone.
 */
export const KEYS_PER_CLIENT = 4;

export async function createTenants(
  url: string,
  orgs: number,
  keysPerOrg: number,
  templateText?: string,
): Promise<Tenant[]> {
  const admin = createClient({ baseUrl: url, credential: { adminKey: ADMIN_KEY } });
  return Promise.all(
    Array.from({ length: orgs }, async (_, i) => {
      const anon = createClient({ baseUrl: url });
      const { accountToken } = await anon.auth.signup({
        email: `owner-${i + 1}@bench.test`,
        password: 'bench password 0123',
      });
      const owner = createClient({
        baseUrl: url,
        credential: { keyId: accountToken.tokenId, secret: accountToken.secret },
      });
      const { organization } = await owner.console.organizations.create({ name: `Bench ${i + 1}` });
      await owner.console.organizations.plan({ id: organization.id, plan: 'payg' });
      const { project } = await owner.console.projects.create({ name: 'bench', organizationId: organization.id });
      const domain = `bench-${i + 1}.test`;
      const claim = await owner.console.projects.domains.create({ id: project.id, domain });
      const cap = (await owner.console.projects.domains.outbound.create({ id: project.id, domainId: claim.id }))
        .outbound[0]!;
      await admin.admin.senderDomains.markVerified({ id: claim.id });
      const keys: Credential[] = [];
      for (let k = 0; k < keysPerOrg; k++) {
        const key = await withBackoff(() =>
          owner.console.projects.apiKeys.create({ id: project.id, label: `bench ${k}`, scopes: ['messages:send'] }),
        );
        keys.push({ keyId: key.keyId, secret: key.secret });
      }
      const dkimTxt: Record<string, string> = {};
      for (const r of [cap.dnsRecords.dkim, cap.dnsRecords.dkimEd25519])
        if (r) dkimTxt[r.host.replace(/\.$/, '')] = r.value;
      if (templateText === undefined) return { domain, dkimTxt, keys };
      const { template } = await owner.modules.templates.templates.create({
        organizationId: organization.id,
        name: 'bench',
        subject: SUBJECT,
        text: templateText,
      });
      return { domain, dkimTxt, keys, templateId: template.id };
    }),
  );
}

/** The owner's account token has the same rate limit as any credential: wait it out when minting many keys. */
async function withBackoff<T>(fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (!(err instanceof SvcError && err.status === 429)) throw err;
      await sleep(1_000);
    }
  }
}

// A short transactional message, the kind the platform is for: ~1 kB once composed.
export const SUBJECT = 'Your sign-in code';
export const TEXT = [
  'Hello,',
  '',
  'Your sign-in code is 482913. It expires in 10 minutes.',
  '',
  'If you did not try to sign in, you can ignore this message: nobody can sign in without the code.',
  '',
  'For your security, never share this code. Our support team will never ask for it.',
  '',
  'Thanks,',
  'The Bench team',
  '',
  'You receive this message because an account uses this address.',
].join('\n');

/** The variable of the tenants' templates (createTenants), and a text that names it before `text`. */
export const TEMPLATE_VARIABLE = 'name';
export const templateTextOf = (text: string) => `Hello {{${TEMPLATE_VARIABLE}}},\n\n${text}`;

/** The domain of message i's recipient when the load spreads over `domains` domains. */
export const recipientDomain = (i: number, domains: number) =>
  domains > 1 ? `d${i % domains}.dest.test` : 'dest.test';

/** The message sizes the benches take (--size): about this many octets once composed. */
export const SIZES: Record<string, number> = {
  '1k': 1024,
  '10k': 10 * 1024,
  '100k': 100 * 1024,
  '1m': 1024 * 1024,
};

/** The text body of a --size (TEXT for 1k, else bodyOfSize); throws for a size not in SIZES. */
export function textOfSize(size: string): string {
  if (!(size in SIZES)) throw new Error(`--size must be one of ${Object.keys(SIZES).join(', ')}`);
  return size === '1k' ? TEXT : bodyOfSize(SIZES[size]!);
}

/** A bench's data directory in the temp folder and a loopback DNS zone, both gone with `cleanups`. */
export async function benchSetup(name: string, cleanups: (() => Promise<unknown>)[]) {
  const dataDir = await mkdtemp(path.join(os.tmpdir(), `svc-${name}-data-`));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const zone = await startDnsZone();
  cleanups.push(() => zone.stop());
  return { dataDir, zone };
}

/**
 * What a sending bench's service runs beside: benchSetup's, with dest.test, the recipients' domain
 * (recipientDomain), given its MX on 127.0.0.1, the sink's address.
 */
export async function sendingSetup(name: string, cleanups: (() => Promise<unknown>)[]) {
  const setup = await benchSetup(name, cleanups);
  setup.zone.mx('dest.test', 10, 'mx.dest.test').a('mx.dest.test', '127.0.0.1');
  return setup;
}

/**
 * The SVC_* settings of a benched service on its database, data directory and DNS zone: one master key for all of
 * its processes (the API keys' secrets are sealed with it), and the per-credential limit lifted (SVC_RATE_LIMIT_*,
 * issue 18 item 3), since the machine's throughput is what is measured.
 */
export function serviceEnv(databaseUrl: string, dataDir: string, dnsServers: string): Record<string, string> {
  return {
    SVC_DATABASE_URL: databaseUrl,
    SVC_DATA_DIR: dataDir,
    SVC_DNS_SERVERS: dnsServers,
    SVC_MASTER_KEY: randomBytes(32).toString('base64'),
    SVC_RATE_LIMIT_BURST: '1000000',
    SVC_RATE_LIMIT_PER_SECOND: '100000',
  };
}

/**
 * A text body that makes a composed message of about `bytes` octets: TEXT, then lines of ordinary words (the
 * kind quoted-printable leaves alone), so 1 kB, 10 kB and 100 kB messages differ in the body alone.
 */
export function bodyOfSize(bytes: number): string {
  const line = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor.';
  const lines = [TEXT];
  // ~500 octets of headers and MIME framing besides the text.
  for (let n = TEXT.length + 500; n < bytes; n += line.length + 1) lines.push(line);
  return lines.join('\n');
}

/** The same words as html: each line a paragraph (what an html-only sender posts; the service makes the text). */
export const htmlOf = (text: string): string =>
  `<html><body>${text
    .split('\n')
    .map((l) => `<p>${l}</p>`)
    .join('\n')}</body></html>`;

/** `s` as a JSON string literal that JSON.stringify writes as it stands (JSON.rawJSON; TypeScript's lib lacks it). */
export const rawJson = (s: string): unknown =>
  (JSON as unknown as { rawJSON(text: string): unknown }).rawJSON(JSON.stringify(s));

export interface LoadResult {
  ok: number;
  errors: Map<string, number>;
  /** Latency of every successful request, ms, ascending. */
  latencies: Float64Array;
  startMs: number;
  endMs: number;
}

/**
 * `concurrency` clients, each with its own key (round robin over the tenants' keys), each sending
 * one request at a time until `count` messages are sent or `untilMs` (performance.now()) passes. With
 * `batch` > 1 each request is a sendBatch of that many messages; `ok` counts messages, `latencies` requests.
 */
export async function sendLoad(
  url: string,
  tenants: Tenant[],
  o: {
    concurrency: number;
    count?: number;
    untilMs?: number;
    firstIndex?: number;
    batch?: number;
    /** The text body (default TEXT, ~1 kB once composed); see bodyOfSize. */
    text?: string;
    /** An html body instead of the text (html only: the service makes the text alternative); see htmlOf. */
    html?: string;
    /** Recipient domains: message i goes to d<i mod domains>.dest.test (1: dest.test alone). */
    domains?: number;
    /**
     * How many keys the clients share, fewer than `concurrency`: client c uses key c mod `keys` alone (1: one sender
     * with one key, as a bulk sender calls). Unset: a key of its own each, taking turns over several.
     */
    keys?: number;
    /** Each message with an idempotency key of its own, as a client that retries safely sends them. */
    idempotencyKeys?: boolean;
    /** Each message names its organization's template (createTenants' templateText), not text or html of its own. */
    template?: boolean;
  },
): Promise<LoadResult> {
  const batch = o.batch ?? 1;
  // The body is the same in every message: JSON-encoded once, as smtp-source sends one prepared message, and put
  // into each request's JSON as it stands (JSON.rawJSON), not escaped again by the SDK's JSON.stringify (~0.14 ms of
  // the load generator's CPU a request at 100 kB, on the cores the service also runs on). The service receives the
  // same octets.
  const body = o.template ? {} : o.html === undefined ? { text: rawJson(o.text ?? TEXT) } : { html: rawJson(o.html) };
  // First in each message, so that every sendEmail's JSON starts with the same octets: `{"text":"…",` (leanSign and
  // leanFetch hash and encode them once, sharedBodyPrefix). A sendBatch's messages sit inside its own JSON, and a
  // template's messages name their organization's: none.
  sharedBodyPrefix(batch === 1 && !o.template ? body : null);
  // Interleaved, so that neighbouring clients belong to different organizations.
  const order: { key: Client; domain: string; templateId?: string }[] = [];
  for (let k = 0; k < Math.max(...tenants.map((t) => t.keys.length)); k++) {
    for (const t of tenants)
      if (t.keys[k])
        order.push({
          // No retries: a refused request is a failure of the run, not something to hide behind a backoff.
          key: createClient({ baseUrl: url, credential: t.keys[k], fetch: leanFetch, sign: leanSign, maxRetries: 0 }),
          domain: t.domain,
          ...(t.templateId ? { templateId: t.templateId } : {}),
        });
  }
  if (o.template && !order.every((k) => k.templateId)) throw new Error('a template load needs tenants with templates');
  if (order.length < o.concurrency) throw new Error(`${o.concurrency} clients need as many keys, have ${order.length}`);

  // Sockets of its own (see closeIdle), spread over the service's workers as they are opened.
  closeIdle();
  let next = o.firstIndex ?? 0;
  const last = o.count === undefined ? Infinity : next + o.count;
  const latencies: number[] = [];
  const errors = new Map<string, number>();
  const startMs = performance.now();
  await Promise.all(
    Array.from({ length: o.concurrency }, async (_, c) => {
      // Client c uses keys c, c + concurrency, …, in turn.
      const mine = o.keys ? [order[c % o.keys]!] : order.filter((_, k) => k % o.concurrency === c);
      for (let n = 0; next < last && (o.untilMs === undefined || performance.now() < o.untilMs); n++) {
        const { key, domain, templateId } = mine[n % mine.length]!;
        const i = next;
        next += batch;
        const message = (j: number) => ({
          ...(body as { text: string } | { html: string }),
          from: `Bench <no-reply@${domain}>`,
          to: `rcpt-${j}@${recipientDomain(j, o.domains ?? 1)}`,
          subject: `${SUBJECT} ${j}`,
          ...(o.template ? { templateId, variables: { [TEMPLATE_VARIABLE]: `rcpt ${j}` } } : {}),
          ...(o.idempotencyKeys ? { idempotencyKey: `bench-${j}` } : {}),
        });
        const t0 = performance.now();
        try {
          if (batch === 1) await key.v1.services.sendEmail(message(i));
          else await key.v1.services.sendBatch({ messages: Array.from({ length: batch }, (_, k) => message(i + k)) });
          latencies.push(performance.now() - t0);
        } catch (err) {
          const what = err instanceof SvcError ? `${err.status} ${err.code}` : String(err);
          errors.set(what, (errors.get(what) ?? 0) + 1);
        }
      }
    }),
  );
  const endMs = performance.now();
  sharedBodyPrefix(null);
  return { ok: latencies.length * batch, errors, latencies: Float64Array.from(latencies).sort(), startMs, endMs };
}

/** sendLoadAlone's slices: this many messages at most (a multiple of any batch the bench sends). */
const ALONE_SLICE = 5_000;

/**
 * sendLoad of `o.count` messages to a control running alone, where nothing delivers, in slices of ALONE_SLICE with the
 * spool under `dataDir` emptied after each (emptySpool): the spool then never holds more than a slice, where a
 * warm-up of 30,000 100 kB messages left ~3 GB behind (and phase 3 of bench/run.ts ~10 GB in all). One result for
 * all the slices, and how many messages they were to accept: a batch load sends whole batches, so its last may go
 * past a slice's count.
 */
export async function sendLoadAlone(
  url: string,
  tenants: Tenant[],
  o: Parameters<typeof sendLoad>[2] & { count: number },
  dataDir: string,
): Promise<LoadResult & { expected: number }> {
  const batch = o.batch ?? 1;
  const first = o.firstIndex ?? 0;
  let ok = 0;
  let expected = 0;
  const errors = new Map<string, number>();
  const latencies: Float64Array[] = [];
  const startMs = performance.now();
  for (let sent = 0; sent < o.count; sent += ALONE_SLICE) {
    const count = Math.min(ALONE_SLICE, o.count - sent);
    const r = await sendLoad(url, tenants, { ...o, count, firstIndex: first + sent });
    await emptySpool(dataDir);
    ok += r.ok;
    expected += Math.ceil(count / batch) * batch;
    for (const [what, n] of r.errors) errors.set(what, (errors.get(what) ?? 0) + n);
    latencies.push(r.latencies);
  }
  const all = new Float64Array(latencies.reduce((n, l) => n + l.length, 0));
  let at = 0;
  for (const l of latencies) {
    all.set(l, at);
    at += l.length;
  }
  return { ok, expected, errors, latencies: all.sort(), startMs, endMs: performance.now() };
}
