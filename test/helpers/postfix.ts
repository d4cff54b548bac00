// A private Debian Postfix on 127.0.0.1 as an independent *receiving* peer: its own main.cf,
// master.cf, queue, data and mail directories under a fresh temp dir, so neither the system instance
// (/etc/postfix/main.cf need not exist) nor another test's instance is touched. Every accepted
// message is delivered by virtual(8) into one maildir the test reads back.
//
//   const pf = await startPostfix(t, {
//     domains: ['example.test'],
//     recipientReplies: { 'gone@example.test': '550 5.1.1 no such user' },
//   });
//   ... send to 127.0.0.1:pf.port ...
//   const [m] = await pf.waitForMessages(1);   // m.rcpt, m.mailFrom, m.raw (with Postfix's headers), m.original
//
// Needs root (postfix start) and the Debian packages postfix (installed unconfigured is fine).
import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, readFile, readdir, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { waitFor } from './wait-for.js';

const run = promisify(execFile);

const POSTFIX = '/usr/sbin/postfix';
const DIR_PREFIX = 'svc-postfix-';

export interface PostfixOptions {
  /**
   * Recipient domains accepted (exact names); '*' (the default) accepts every domain. Others get 554 5.7.1 relay
   * denied.
   */
  domains?: readonly string[] | '*';
  /**
   * Scripted RCPT replies, as access(5) lookups of check_recipient_access: the key is an address,
   * a domain or a `localpart@`; the value a reply such as '550 5.1.1 no such user' or '450 4.2.0 try
   * later'. Postfix prefixes the text with "<rcpt>: Recipient address rejected:".
   */
  recipientReplies?: Readonly<Record<string, string>>;
  /** myhostname: the banner, EHLO reply and Received "by" name. */
  hostname?: string;
  /** message_size_limit in bytes (Postfix default 10240000). */
  messageSizeLimit?: number;
  /** Further main.cf settings, applied last (e.g. smtpd TLS for a STARTTLS test). */
  mainCf?: Readonly<Record<string, string>>;
  /** How long start may take before it fails (default 30 s). */
  startTimeoutMs?: number;
}

export interface PostfixMessage {
  /** The envelope recipient as given in RCPT TO (X-Original-To). */
  rcpt: string;
  /** The envelope sender (Return-Path); '' for the null sender. */
  mailFrom: string;
  /**
   * The delivered file with CRLF line ends, as on the wire: Postfix's Return-Path, X-Original-To,
   * Delivered-To and Received lines, then the client's message byte for byte. Postfix keeps lines,
   * not line ends, so only CRLF-clean input comes back exact: a bare LF comes back as CRLF, and a
   * bare CR as a space (seen with Debian's Postfix 3.7).
   */
  raw: Buffer;
  /** raw without the four header fields Postfix added: exactly the DATA the client sent (dot-unstuffed). */
  original: Buffer;
  /** Path of the maildir file. */
  file: string;
}

export interface PostfixPeer {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly hostname: string;
  /** The temp dir holding etc/, queue/, data/, mail/ and maillog. */
  readonly dir: string;
  /** Every delivered message, oldest first. */
  messages(): Promise<PostfixMessage[]>;
  /** Waits until at least n messages are delivered (default timeout 10 s); the error carries the maillog tail. */
  waitForMessages(n: number, timeoutMs?: number): Promise<PostfixMessage[]>;
  /** Postfix's own log (maillog_file): connections, rejections, deliveries. */
  log(): Promise<string>;
  /** Stops the master and its children; idempotent. The temp dir is removed in teardown. */
  stop(): Promise<void>;
}

interface Teardown {
  teardown(fn: () => unknown): void;
}

// ---- process bookkeeping --------------------------------------------------------------------------

/** Masters started by this process, stopped on exit even when a teardown never ran. */
const live = new Map<number, string>(); // master pid → queue dir
let exitHookInstalled = false;

/**
 * True while `pid` is a running (not zombie) process whose working directory is `queueDir`: Postfix's
 * master and every daemon chdir to queue_directory, so this tells our master from a reused pid.
 */
function isOurs(pid: number, queueDir: string): boolean {
  try {
    return readlinkSync(`/proc/${pid}/cwd`) === queueDir;
  } catch {
    return false; // gone, or a zombie (whose cwd link is unreadable)
  }
}

/** The master sets up its own session (setsid), so its pid is also the process group of its daemons. */
function killGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: nothing left in the group
  }
}

function installExitHook(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const [pid, queueDir] of live) if (isOurs(pid, queueDir)) killGroup(pid, 'SIGKILL');
  });
}

async function readMasterPid(queueDir: string): Promise<number | null> {
  try {
    const pid = Number.parseInt((await readFile(path.join(queueDir, 'pid', 'master.pid'), 'utf8')).trim(), 10);
    return Number.isSafeInteger(pid) && pid > 1 ? pid : null;
  } catch {
    return null;
  }
}

/** The pids of every live process working in `queueDir`: the master and its daemons. */
function processesIn(queueDir: string): number[] {
  let names: string[];
  try {
    names = readdirSync('/proc');
  } catch {
    return [];
  }
  return names
    .filter((n) => /^\d+$/.test(n))
    .map(Number)
    .filter((p) => isOurs(p, queueDir));
}

/**
 * SIGTERM the master (it takes its daemons down); SIGKILL its group if it lingers, then any daemon a
 * dead master left. The group is only signalled while the master is alive and ours, so a stale pid
 * file never reaches a stranger's group. Resolves when no process of the instance is left, so the
 * port is closed by then.
 */
async function stopMaster(pid: number, queueDir: string): Promise<void> {
  if (isOurs(pid, queueDir)) {
    process.kill(pid, 'SIGTERM');
    await waitFor(() => !isOurs(pid, queueDir), { timeoutMs: 5_000, what: 'postfix master to exit' }).catch(
      () => undefined,
    );
    if (isOurs(pid, queueDir)) killGroup(pid, 'SIGKILL');
  }
  await waitFor(
    () => {
      const left = processesIn(queueDir);
      for (const p of left) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          // already gone
        }
      }
      return left.length === 0;
    },
    { timeoutMs: 5_000, what: `postfix processes in ${queueDir} to end` },
  ).catch(() => undefined);
  live.delete(pid);
}

function processAlive(pid: number): boolean {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return s.slice(s.lastIndexOf(')') + 2, s.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/**
 * Removes instances left by test processes that died without their teardown (SIGKILL, a crash): their
 * dir names an owner pid that no longer runs. Instances of live test processes are left alone.
 */
async function sweepLeftovers(): Promise<void> {
  const tmp = os.tmpdir();
  let names: string[];
  try {
    names = (await readdir(tmp)).filter((n) => n.startsWith(DIR_PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = path.join(tmp, name);
    const owner = Number.parseInt(await readFile(path.join(dir, 'owner.pid'), 'utf8').catch(() => ''), 10);
    if (!Number.isSafeInteger(owner) || owner === process.pid || processAlive(owner)) continue;
    const queueDir = path.join(dir, 'queue');
    const pid = await readMasterPid(queueDir);
    if (pid !== null) await stopMaster(pid, queueDir);
    await rm(dir, { recursive: true, force: true });
  }
}

// ---- configuration --------------------------------------------------------------------------------

interface Ids {
  uid: number;
  gid: number;
  /** setgid_group: group of the maildrop and public queue directories. */
  postdrop: number;
}

/** The postfix user (mail_owner) and postdrop group, read from /etc/passwd and /etc/group (Node has no getpwnam). */
async function postfixIds(): Promise<Ids> {
  const field = async (file: string, name: string) => {
    const line = (await readFile(file, 'utf8')).split('\n').find((l) => l.startsWith(`${name}:`));
    const f = line?.split(':');
    if (!f || f.length < 4)
      throw new Error(`startPostfix: no "${name}" in ${file} (is the Debian postfix package installed?)`);
    return f;
  };
  const user = await field('/etc/passwd', 'postfix');
  const group = await field('/etc/group', 'postdrop');
  return { uid: Number(user[2]), gid: Number(user[3]), postdrop: Number(group[2]) };
}

/**
 * The queue tree of /etc/postfix/postfix-files, made here rather than by `post-install create-missing`
 * at start: that script runs postconf a dozen times and takes seconds, this takes a millisecond.
 */
async function makeQueue(queueDir: string, ids: Ids): Promise<void> {
  const owned = [
    'active',
    'bounce',
    'corrupt',
    'defer',
    'deferred',
    'flush',
    'hold',
    'incoming',
    'private',
    'saved',
    'trace',
  ];
  const dirs: [string, number, number, number][] = [
    ...owned.map((d): [string, number, number, number] => [d, ids.uid, ids.gid, 0o700]),
    ['maildrop', ids.uid, ids.postdrop, 0o730],
    ['public', ids.uid, ids.postdrop, 0o710],
    ['pid', 0, 0, 0o755],
  ];
  for (const [name, uid, gid, mode] of dirs) {
    const d = path.join(queueDir, name);
    await mkdir(d);
    await chown(d, uid, gid);
    await chmod(d, mode); // after mkdir, as the umask would clear group bits
  }
}

const DOMAIN_RE =
  /^(?=.{1,253}$)[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;
const REPLY_RE = /^[45]\d\d (?:[45]\.\d{1,3}\.\d{1,3} )?[^\r\n]*$/;
const KEY_RE = /^[^\s@]*@?[^\s@]*$/;

function mainCf(dir: string, ids: Ids, hostname: string, opts: PostfixOptions): string {
  const etc = path.join(dir, 'etc');
  const domains = opts.domains ?? '*';
  const settings: Record<string, string> = {
    compatibility_level: '3.6',
    config_directory: etc,
    queue_directory: path.join(dir, 'queue'),
    data_directory: path.join(dir, 'data'),
    mail_owner: 'postfix',
    setgid_group: 'postdrop',
    // Unique names, so that concurrent instances are told apart in logs and process lists.
    syslog_name: `postfix-${path.basename(dir)}`,
    maillog_file: path.join(dir, 'maillog'),
    maillog_file_prefixes: dir,
    myhostname: hostname,
    mydestination: '',
    inet_interfaces: '127.0.0.1',
    inet_protocols: 'ipv4',
    mynetworks: '127.0.0.0/8',
    // A receiver only: no DNS for client names, and nothing ever leaves (bounces go to error(8)).
    smtpd_peername_lookup: 'no',
    disable_dns_lookups: 'yes',
    default_transport: 'error:5.7.1 private test instance does not relay',
    relay_transport: 'error:5.7.1 private test instance does not relay',
    local_transport: 'error:5.7.1 private test instance has no local delivery',
    alias_maps: '',
    alias_database: '',
    local_recipient_maps: '',
    biff: 'no',
    // Keep the client's bytes: no header rewriting for any client, no dropped headers (the default
    // drops Bcc, Content-Length, Resent-Bcc, Return-Path), no MIME inspection, no address mapping.
    local_header_rewrite_clients: '',
    remote_header_rewrite_domain: '',
    message_drop_headers: '',
    disable_mime_input_processing: 'yes',
    receive_override_options: 'no_address_mappings',
    // Tests send bursts and provoke errors: no flow-control or error delays.
    in_flow_delay: '0',
    smtpd_error_sleep_time: '0',
    // Relaying is denied even from mynetworks: a recipient outside `domains` gets 554 5.7.1.
    smtpd_relay_restrictions: 'reject_unauth_destination',
    smtpd_recipient_restrictions: `check_recipient_access texthash:${path.join(etc, 'recipient_access')}, permit`,
    // static:… matches every domain (a lookup table in a domain list matches when it answers).
    virtual_mailbox_domains: domains === '*' ? 'static:all' : domains.join(' '),
    virtual_mailbox_base: path.join(dir, 'mail'),
    virtual_mailbox_maps: 'static:inbox/', // one maildir for everyone; X-Original-To tells the recipient
    virtual_mailbox_limit: '0',
    virtual_uid_maps: `static:${ids.uid}`,
    virtual_gid_maps: `static:${ids.gid}`,
  };
  if (opts.messageSizeLimit !== undefined) settings.message_size_limit = String(opts.messageSizeLimit);
  Object.assign(settings, opts.mainCf);
  return Object.entries(settings)
    .map(([k, v]) => `${k} = ${v}\n`)
    .join('');
}

/**
 * master.cf of a private instance, none chrooted: the services every instance here uses, plus `extra`
 * lines (this helper's instances deliver locally: `virtual`; the bench's relays: `smtp`, `relay`).
 */
export function masterCf(port: number, extra: readonly string[]): string {
  return [
    `127.0.0.1:${port} inet n - n - - smtpd`,
    'cleanup   unix n - n - 0 cleanup',
    'qmgr      unix n - n 300 1 qmgr',
    'rewrite   unix - - n - - trivial-rewrite',
    'bounce    unix - - n - 0 bounce',
    'defer     unix - - n - 0 bounce',
    'trace     unix - - n - 0 bounce',
    'verify    unix - - n - 1 verify',
    'flush     unix n - n 1000? 0 flush',
    'proxymap  unix - - n - - proxymap',
    'showq     unix n - n - - showq',
    'error     unix - - n - - error',
    'retry     unix - - n - - error',
    'discard   unix - - n - - discard',
    ...extra,
    'anvil     unix - - n - 1 anvil',
    'scache    unix - - n - 1 scache',
    'postlog   unix-dgram n - n - 1 postlogd',
    '',
  ].join('\n');
}

function recipientAccess(replies: Readonly<Record<string, string>>): string {
  return Object.entries(replies)
    .map(([key, reply]) => {
      if (!key || !KEY_RE.test(key)) throw new Error(`startPostfix: bad recipientReplies key ${JSON.stringify(key)}`);
      if (!REPLY_RE.test(reply))
        throw new Error(
          `startPostfix: recipientReplies value must be "4xx|5xx [x.y.z ]text", got ${JSON.stringify(reply)}`,
        );
      return `${key.toLowerCase()} ${reply}\n`;
    })
    .join('');
}

/**
 * Postfix's table and main.cf loader (dict_load_file) re-reads a file until its mtime is in the past,
 * sleeping 300 ms a round, so that it never reads one half-written: a file written a moment ago
 * costs each Postfix program 1-2 s. Ours are complete, so they are dated back.
 */
async function writeConfig(file: string, text: string): Promise<void> {
  await writeFile(file, text);
  const past = new Date(Date.now() - 60_000);
  await utimes(file, past, past);
}

/**
 * Starts the Postfix of `etc` (queue directory `queueDir`) with its smtpd on a port found free and `services` beside it
 * in master.cf, and returns the port. Postfix binds the port itself, so a port found free may be taken before master
 * binds it; master then fails its start (master -w reports it) and another port is tried, five times at most and until
 * `deadline`. `beforeEach` runs before each start.
 */
export async function startOnFreePort(
  etc: string,
  queueDir: string,
  services: readonly string[],
  o: { deadline: number; beforeEach?: () => Promise<void>; logTail: () => Promise<string>; what: string },
): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    await writeConfig(path.join(etc, 'master.cf'), masterCf(port, services));
    await o.beforeEach?.();
    try {
      await run(POSTFIX, ['-c', etc, 'start'], { timeout: Math.max(1_000, o.deadline - Date.now()) });
      return port;
    } catch (err) {
      const p = await readMasterPid(queueDir);
      if (p !== null) await stopMaster(p, queueDir);
      if (attempt >= 5 || Date.now() > o.deadline) {
        const e = err as { stderr?: string; message: string };
        throw new Error(`${o.what}: postfix start failed: ${e.stderr?.trim() || e.message}\n${await o.logTail()}`);
      }
    }
  }
}

/**
 * A TCP port free on 127.0.0.1 now (the bench uses it too), for a server started next. Never for a port that must
 * stay closed: once let go, the kernel hands it to the next listen(0) of any process, such as a test running beside
 * this one. A closed port is port 1, below the ephemeral range (32768-60999 on Linux), which no test binds.
 */
export async function freePort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  const { port } = srv.address() as net.AddressInfo;
  await new Promise((r) => srv.close(r));
  return port;
}

/** Resolves once a connection to port gets a 220 greeting (RFC 5321 §4.2), then says QUIT. */
function banner(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = (ok: boolean) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(2_000, () => done(false));
    s.on('error', () => done(false));
    s.on('data', (d) => {
      buf += d.toString('latin1');
      if (/^220 .*\r\n/m.test(buf)) {
        s.end('QUIT\r\n');
        resolve(true);
      } else if (/^\d{3} .*\r\n/m.test(buf)) done(false);
    });
    s.on('close', () => resolve(false));
  });
}

// ---- reading deliveries ---------------------------------------------------------------------------

/** Postfix stores lines without their CRLF; put the SMTP line end back on every line. */
function toCrlf(file: Buffer): Buffer {
  const out: Buffer[] = [];
  let start = 0;
  for (let i = file.indexOf(0x0a); i >= 0; i = file.indexOf(0x0a, start)) {
    out.push(file.subarray(start, i), Buffer.from('\r\n'));
    start = i + 1;
  }
  out.push(file.subarray(start));
  return Buffer.concat(out);
}

/** Splits off the first header field (with its folded continuation lines) of a CRLF message. */
function firstField(buf: Buffer): { name: string; value: string; length: number } | null {
  let end = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', end);
    if (eol < 0) return null;
    end = eol + 2;
    if (buf[end] !== 0x20 && buf[end] !== 0x09) break; // RFC 5322 §2.2.3: folding starts with WSP
  }
  const text = buf.subarray(0, end).toString('latin1');
  const colon = text.indexOf(':');
  if (colon <= 0) return null;
  return {
    name: text.slice(0, colon).toLowerCase(),
    value: text
      .slice(colon + 1)
      .replace(/\r\n/g, '')
      .trim(),
    length: end,
  };
}

function parseDelivery(file: string, data: Buffer, hostname: string): PostfixMessage {
  const raw = toCrlf(data);
  // virtual(8) prepends Return-Path, X-Original-To and Delivered-To; smtpd/cleanup prepended one Received.
  const seen: Record<string, string> = {};
  let offset = 0;
  for (const name of ['return-path', 'x-original-to', 'delivered-to', 'received']) {
    const f = firstField(raw.subarray(offset));
    if (!f || f.name !== name)
      throw new Error(`postfix peer: ${file} does not start with the ${name} field Postfix adds`);
    seen[name] = f.value;
    offset += f.length;
  }
  if (!seen.received?.includes(`by ${hostname} (Postfix)`))
    throw new Error(`postfix peer: unexpected Received field in ${file}: ${seen.received}`);
  return {
    rcpt: seen['x-original-to'] ?? '',
    mailFrom: (seen['return-path'] ?? '').replace(/^<|>$/g, ''),
    raw,
    original: raw.subarray(offset),
    file,
  };
}

/** Maildir names from virtual(8) are "<sec>.V<dev>I<inode>M<usec>.<host>": order by delivery time. */
function deliveryOrder(name: string): [number, number] {
  const m = /^(\d+)\.V[0-9a-f]+I[0-9a-f]+M(\d+)\./.exec(name);
  return m ? [Number(m[1]), Number(m[2])] : [Number.MAX_SAFE_INTEGER, 0];
}

// ---- start ----------------------------------------------------------------------------------------

export async function startPostfix(t: Teardown, opts: PostfixOptions = {}): Promise<PostfixPeer> {
  if (process.getuid?.() !== 0) throw new Error('startPostfix: must run as root (postfix start)');
  await stat(POSTFIX).catch(() => {
    throw new Error(`startPostfix: ${POSTFIX} not found (apt-get install postfix)`);
  });
  const hostname = opts.hostname ?? 'peer-postfix.test';
  if (!DOMAIN_RE.test(hostname)) throw new Error(`startPostfix: bad hostname ${JSON.stringify(hostname)}`);
  if (opts.domains !== undefined && opts.domains !== '*') {
    if (opts.domains.length === 0) throw new Error('startPostfix: domains is empty (use "*" for every domain)');
    for (const d of opts.domains)
      if (!DOMAIN_RE.test(d)) throw new Error(`startPostfix: bad domain ${JSON.stringify(d)}`);
  }
  const access = recipientAccess(opts.recipientReplies ?? {});

  await sweepLeftovers();
  installExitHook();

  const ids = await postfixIds();
  const dir = await mkdtemp(path.join(os.tmpdir(), DIR_PREFIX));
  const etc = path.join(dir, 'etc');
  const queueDir = path.join(dir, 'queue');
  const mailDir = path.join(dir, 'mail');
  let pid: number | null = null;
  let stopped = false;

  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    const p = pid ?? (await readMasterPid(queueDir));
    if (p !== null) await stopMaster(p, queueDir);
  };
  t.teardown(async () => {
    await stop();
    await rm(dir, { recursive: true, force: true });
  });

  await writeFile(path.join(dir, 'owner.pid'), `${process.pid}\n`);
  // The daemons run as the postfix user and chdir into queue/: every directory on the way must be searchable.
  await chmod(dir, 0o755);
  for (let d = path.dirname(dir); d !== path.dirname(d); d = path.dirname(d)) {
    if (((await stat(d)).mode & 0o001) === 0)
      throw new Error(`startPostfix: ${d} is not searchable by the postfix user; set TMPDIR elsewhere`);
  }
  await mkdir(etc);
  await mkdir(queueDir);
  await makeQueue(queueDir, ids);
  for (const d of [path.join(dir, 'data'), mailDir]) {
    await mkdir(d, { mode: 0o700 });
    await chown(d, ids.uid, ids.gid);
  }
  await writeConfig(path.join(etc, 'main.cf'), mainCf(dir, ids, hostname, opts));
  await writeConfig(path.join(etc, 'recipient_access'), access);

  const log = () => readFile(path.join(dir, 'maillog'), 'utf8').catch(() => '');
  const logTail = async () => (await log()).split('\n').slice(-30).join('\n');

  const deadline = Date.now() + (opts.startTimeoutMs ?? 30_000);
  const port = await startOnFreePort(etc, queueDir, ['virtual   unix - n n - - virtual'], {
    deadline,
    // postfix-script skips its integrity checks (check-fatal, check-warn: seconds of find and postconf)
    // once when this file exists; the tree they would check was made just above.
    beforeEach: () => writeFile(path.join(queueDir, 'quick-start'), ''),
    logTail,
    what: 'startPostfix',
  });
  pid = await readMasterPid(queueDir);
  if (pid !== null) live.set(pid, queueDir);

  await waitFor(() => banner(port), {
    timeoutMs: Math.max(1_000, deadline - Date.now()),
    everyMs: 25,
    what: `postfix banner on 127.0.0.1:${port}`,
  }).catch(async (err: Error) => {
    throw new Error(`${err.message}\n${await logTail()}`);
  });

  const messages = async (): Promise<PostfixMessage[]> => {
    const inbox = path.join(mailDir, 'inbox');
    const files: { file: string; order: [number, number] }[] = [];
    for (const sub of ['new', 'cur']) {
      const names = await readdir(path.join(inbox, sub)).catch(() => [] as string[]);
      for (const n of names) files.push({ file: path.join(inbox, sub, n), order: deliveryOrder(n) });
    }
    files.sort((a, b) => a.order[0] - b.order[0] || a.order[1] - b.order[1] || a.file.localeCompare(b.file));
    return Promise.all(files.map(async ({ file }) => parseDelivery(file, await readFile(file), hostname)));
  };

  return {
    host: '127.0.0.1',
    port,
    hostname,
    dir,
    messages,
    async waitForMessages(n, timeoutMs = 10_000) {
      try {
        return await waitFor(
          async () => {
            const list = await messages();
            return list.length >= n ? list : null;
          },
          { timeoutMs, everyMs: 25, what: `${n} message(s) delivered by postfix on port ${port}` },
        );
      } catch (err) {
        throw new Error(`${(err as Error).message}; delivered: ${(await messages()).length}\n${await logTail()}`);
      }
    },
    log,
    stop,
  };
}
