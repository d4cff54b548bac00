// `svc dev` (`npm run dev`): the service with every role on embedded defaults, for a developer's machine
// (docs/development.md). Beside `svc start` it runs the development DNS zone (dev/zone.ts, dev/records.ts:
// every record the service asks for is published at once), the catch-all SMTP sink (dev/sink.ts: every
// delivered message is kept in the data directory, none leaves) and the caught-mail pages (dev/pages.ts),
// then prints a ready project API key of a verified sending domain. Only ever active when run as `svc dev`;
// it refuses a database that is not on this machine.
//   svc dev [--ui-port 8025] [--sink-port 0] [--dns-port 0]
//   svc dev messages [<id>]
import { parseArgs } from 'node:util';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import { isIP } from 'node:net';
import path from 'node:path';
import { createClient, SvcError } from '@svc-mail/sdk';
import { loadConfig } from '../config/load.js';
import { markServiceProcess } from './exit-mode.js';
import { startService, type RunningService } from './start.js';
import { startDevZone } from '../dev/zone.js';
import { devLookup } from '../dev/records.js';
import { caughtDir, listCaught, readCaught, startSink } from '../dev/sink.js';
import { listenPages } from '../dev/pages.js';

const usage = `usage: svc dev [--ui-port N] [--sink-port N] [--dns-port N]   run the service in development mode
       svc dev messages                                          list the caught messages
       svc dev messages <id>                                     print one caught message as received`;

export const DEV_DATA_DIR = './data-dev';
export const DEV_HOSTNAME = 'svc.localhost';
export const DEV_DOMAIN = 'dev.test';
const SCOPES = ['messages:send', 'messages:read', 'suppressions:read', 'suppressions:write'] as const;

/** The host of a database URL that is not on this machine, or null when every host it names is local. */
export function remoteDatabaseHost(url: string, env: NodeJS.ProcessEnv = process.env): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return url;
  }
  // libpq's host=… parameter overrides the authority; with neither, the client reads PGHOST.
  const named = [u.hostname, ...u.searchParams.getAll('host')].filter(Boolean);
  const hosts = named.length ? named : (env.PGHOST ?? '').split(',').filter(Boolean);
  for (const raw of hosts) {
    const host = decodeURIComponent(raw)
      .replace(/^\[|\]$/g, '')
      .toLowerCase();
    if (host.startsWith('/')) continue; // a Unix socket directory
    if (host === 'localhost' || host.endsWith('.localhost')) continue;
    if (isIP(host) === 4 && host.startsWith('127.')) continue;
    if (host === '::1') continue;
    return host;
  }
  return null;
}

interface DevCredentials {
  email: string;
  password: string;
  organizationId: string;
  projectId: string;
  domain: string;
  keyId: string;
  secret: string;
}

async function readJson<T>(file: string): Promise<T | null> {
  try {
    return JSON.parse(await readFile(file, 'utf8')) as T;
  } catch {
    return null;
  }
}

/** The platform key of this data directory: generated on the first run, kept (mode 0600) for the next. */
async function platformKey(dir: string): Promise<string> {
  const file = path.join(dir, 'platform-admin.key');
  try {
    const key = (await readFile(file, 'utf8')).trim();
    if (key.length >= 16) return key;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  const key = randomBytes(24).toString('base64url');
  await writeFile(file, `${key}\n`, { mode: 0o600 });
  return key;
}

const suffix = () => randomBytes(3).toString('hex');
const taken = (err: unknown) => err instanceof SvcError && err.status === 409;

/**
 * A user, an organization, a project, the sending domain claimed and verified through the development zone
 * (the same DNS checks as in production: the zone publishes what they look for) and an API key that sends.
 * Kept in the data directory, so the next run prints the same key; made again when the key no longer works
 * (a database emptied beside it).
 */
async function ensureCredentials(baseUrl: string, file: string): Promise<DevCredentials> {
  const known = await readJson<DevCredentials>(file);
  if (known) {
    const key = createClient({ baseUrl, credential: { keyId: known.keyId, secret: known.secret } });
    try {
      await key.v1.services.whoami();
      return known;
    } catch (err) {
      if (!(err instanceof SvcError) || (err.status !== 401 && err.status !== 403)) throw err;
    }
  }
  const anon = createClient({ baseUrl });
  const password = randomBytes(18).toString('base64url');
  let email = 'dev@dev.test';
  const signup = () => anon.auth.signup({ email, password });
  const session = await signup().catch(async (err: unknown) => {
    if (!taken(err)) throw err;
    email = `dev-${suffix()}@dev.test`;
    return signup();
  });
  const me = createClient({
    baseUrl,
    credential: { keyId: session.accountToken.tokenId, secret: session.accountToken.secret },
  });
  const { organization } = await me.console.organizations.create({ name: 'Development' });
  const { project } = await me.console.projects.create({ name: 'dev', organizationId: organization.id });
  let domain = DEV_DOMAIN;
  const claimDomain = () => me.console.projects.domains.create({ id: project.id, domain });
  const claim = await claimDomain().catch(async (err: unknown) => {
    if (!taken(err)) throw err;
    domain = `dev-${suffix()}.test`;
    return claimDomain();
  });
  await me.console.projects.domains.verify({ id: project.id, domainId: claim.id });
  const withOutbound = await me.console.projects.domains.outbound.create({ id: project.id, domainId: claim.id });
  const cap = withOutbound.outbound.find((o) => o.domain === domain) ?? withOutbound.outbound[0]!;
  await me.console.projects.outbound.verify({ id: project.id, capId: cap.id });
  const key = await me.console.projects.apiKeys.create({ id: project.id, label: 'svc dev', scopes: [...SCOPES] });
  const creds: DevCredentials = {
    email,
    password,
    organizationId: organization.id,
    projectId: project.id,
    domain,
    keyId: key.keyId,
    secret: key.secret,
  };
  await writeFile(file, `${JSON.stringify(creds, null, 2)}\n`, { mode: 0o600 });
  return creds;
}

const shellQuote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

async function messages(args: string[], dataDir: string): Promise<number> {
  const dir = caughtDir(dataDir);
  if (args.length > 1) {
    console.error(usage);
    return 2;
  }
  if (args[0]) {
    const found = await readCaught(dir, args[0]);
    if (!found) {
      console.error(`svc dev messages: no caught message ${JSON.stringify(args[0])} in ${dir}`);
      return 1;
    }
    await new Promise<void>((resolve, reject) => process.stdout.write(found.raw, (e) => (e ? reject(e) : resolve())));
    return 0;
  }
  const list = await listCaught(dir);
  if (!list.length) {
    console.log(`no caught message yet (${dir})`);
    return 0;
  }
  for (const m of list) console.log([m.id, m.receivedAt, m.from, m.rcptTo.join(','), m.subject].join('\t'));
  return 0;
}

export async function dev(args: string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const dataDir = env.SVC_DATA_DIR?.trim() || DEV_DATA_DIR;
  if (args[0] === 'messages') return messages(args.slice(1), dataDir);
  if (args[0] === 'help' || args[0] === '--help') {
    console.log(usage);
    return 0;
  }
  let values: { 'ui-port': string; 'sink-port': string; 'dns-port': string };
  try {
    ({ values } = parseArgs({
      args,
      options: {
        'ui-port': { type: 'string', default: '8025' },
        'sink-port': { type: 'string', default: '0' },
        'dns-port': { type: 'string', default: '0' },
      },
    }) as { values: typeof values });
  } catch (err) {
    console.error(`svc dev: ${err instanceof Error ? err.message : String(err)}\n${usage}`);
    return 2;
  }
  const ports: Record<string, number> = {};
  for (const [name, raw] of Object.entries(values)) {
    const n = Number(raw);
    if (!/^\d{1,5}$/.test(raw) || n > 65535) {
      console.error(`svc dev: --${name} must be a TCP port, 0-65535 (got ${JSON.stringify(raw)})`);
      return 2;
    }
    ports[name] = n;
  }
  const dbUrl = env.SVC_DATABASE_URL?.trim();
  const remote = dbUrl ? remoteDatabaseHost(dbUrl, env) : null;
  if (remote !== null) {
    console.error(
      `svc dev: SVC_DATABASE_URL points at ${remote}, not at this machine; development mode only runs on a ` +
        'local database (unset SVC_DATABASE_URL for the embedded one)',
    );
    return 2;
  }

  markServiceProcess();
  const devDir = path.join(dataDir, 'dev');
  await mkdir(devDir, { recursive: true, mode: 0o700 });
  const adminKey = env.SVC_PLATFORM_ADMIN_KEY?.trim() || (await platformKey(devDir));
  const hostname = env.SVC_HOSTNAME?.trim() || DEV_HOSTNAME;
  const loopback = '127.0.0.1';

  let running: RunningService | null = null;
  const stops: (() => Promise<void>)[] = [];
  const stopAll = async () => {
    for (const stop of stops.reverse()) await stop().catch(() => undefined);
  };
  try {
    const caught = caughtDir(dataDir);
    const sink = await startSink({
      dir: caught,
      host: loopback,
      port: ports['sink-port']!,
      hostname: `sink.${hostname}`,
      maxBytes: 64 * 1024 * 1024,
      onCaught: (m) =>
        console.log(`caught ${m.id}: ${m.from || m.mailFrom} → ${m.rcptTo.join(', ')}: ${m.subject || '(no subject)'}`),
      onError: (err) => console.error(`svc dev: the sink failed to keep a message: ${String(err)}`),
    });
    stops.push(sink.close);
    // The zone answers SERVFAIL until the database is open (nothing asks before).
    let lookup: ((name: string, type: string) => ReturnType<ReturnType<typeof devLookup>>) | null = null;
    const zone = await startDevZone({
      host: loopback,
      port: ports['dns-port']!,
      lookup: (name, type) => (lookup ? lookup(name, type) : Promise.resolve('servfail')),
    });
    stops.push(zone.stop);

    const config = loadConfig({
      ...env,
      SVC_DATA_DIR: dataDir,
      SVC_HOSTNAME: hostname,
      SVC_PLATFORM_ADMIN_KEY: adminKey,
      SVC_LOG_LEVEL: env.SVC_LOG_LEVEL?.trim() || 'warn',
      SVC_ALLOW_PRIVATE_WEBHOOKS: env.SVC_ALLOW_PRIVATE_WEBHOOKS?.trim() || '1',
      // What makes development mode: every lookup asks the zone, every delivery reaches the sink.
      SVC_DNS_SERVERS: zone.hostPort,
      SVC_OUTBOUND_PORT: String(sink.port),
      SVC_ALLOW_PRIVATE_MX: '1',
    });
    running = await startService(config, { role: 'all' });
    const svc = running;
    stops.push(() => svc.stop());
    const hosts = {
      hostname: config.hostname,
      mxHost: config.mxHost,
      webmailHost: config.webmailHost,
      sinkHost: `sink.${config.hostname}`,
    };
    lookup = devLookup(() => svc.storage.db, hosts);

    const pages = await listenPages({ dir: caught, host: config.bindHost, port: ports['ui-port']! });
    stops.push(pages.close);
    const local = (port: number) =>
      `http://${['0.0.0.0', '::'].includes(config.bindHost) ? loopback : config.bindHost.includes(':') ? `[${config.bindHost}]` : config.bindHost}:${port}`;
    const apiUrl = local(svc.ports.http!);
    const uiUrl = `${local(pages.port)}/dev/messages`;
    const creds = await ensureCredentials(apiUrl, path.join(devDir, 'credentials.json'));

    const body = JSON.stringify({
      from: `hello@${creds.domain}`,
      to: 'someone@example.com',
      subject: 'Hello from svc dev',
      text: 'It works.',
    });
    console.log(
      [
        '',
        'svc dev: ready. Development mode: DNS answers from a local zone and every delivered message is caught here;',
        'nothing leaves this machine.',
        '',
        `  API               ${apiUrl}`,
        `  caught mail       ${uiUrl}   (npm run svc -- dev messages)`,
        `  sending domain    ${creds.domain} (verified; its DKIM, SPF and DMARC records are in the dev zone)`,
        `  DNS zone          ${zone.hostPort}     SMTP sink ${loopback}:${sink.port}`,
        `  SMTP (MX) ${svc.ports.smtp}, IMAP ${svc.ports.imap}, data in ${dataDir}`,
        '',
        `export SVC_API_URL=${apiUrl}`,
        `export SVC_API_KEY_ID=${creds.keyId}`,
        `export SVC_API_KEY_SECRET=${creds.secret}`,
        `export SVC_PLATFORM_ADMIN_KEY=${adminKey}`,
        '',
        `Next: npm run svc -- api POST /v1/services/sendEmail ${shellQuote(body)}`,
        '',
      ].join('\n'),
    );
  } catch (err) {
    await stopAll();
    throw err;
  }
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', () => resolve());
    process.once('SIGINT', () => resolve());
  });
  await stopAll();
  console.log('svc dev: stopped');
  return 0;
}
