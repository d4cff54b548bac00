// A private Debian Dovecot (dovecot-imapd) serving one user's Maildir, the IMAP benchmark's peer
// (bench/imap.ts): its own config, base, state and log under a temp dir, run in the foreground as our
// child (`dovecot -c <conf> -F`) and stopped with `doveadm -c <conf> stop`, so the system instance
// (/etc/dovecot) is never read or touched. Needs root (Dovecot starts as root and drops to its users).
//
// Settings are Dovecot's defaults (`doveconf -d`) except what a loopback bench needs: IMAP only, on
// 127.0.0.1 at a free port, no TLS and plaintext LOGIN allowed, one user in a passwd-file with a
// static userdb (the `dovecot` system user owns the Maildir), and first_valid_uid lowered to let that
// uid in. The process model stays the default: one imap-login process per connection until login
// (service_count 1), then one imap process per connection (client_limit 1, process_limit 1024), so
// 1,000 idle connections are 1,000 imap processes. mail_max_userip_connections stays 10: the bench
// spreads its connections over loopback source addresses.
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, utimes, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, sleep, user, waitPort } from './util.js';

const run = promisify(execFile);
const DOVECOT = '/usr/sbin/dovecot';
const DOVEADM = '/usr/bin/doveadm';

export interface MaildirMessage {
  bytes: Buffer;
  /** INTERNALDATE: the file's mtime, as Dovecot's Maildir reads it. */
  date: Date;
}

export interface Dovecot {
  port: number;
  version: string;
  username: string;
  password: string;
  /** Pids of the master and every process under it (imap-login, imap, auth, anvil, log, …). */
  pids(): number[];
  log(): Promise<string>;
  stop(): Promise<void>;
}

/** Writes `messages` as a Maildir at `dir` (cur/, flags none), each file named with its size (,S=). */
export async function writeMaildir(dir: string, messages: readonly MaildirMessage[], owner: string): Promise<void> {
  const ids = user(owner);
  for (const sub of ['', 'cur', 'new', 'tmp']) {
    await mkdir(path.join(dir, sub), { recursive: true, mode: 0o700 });
    await chown(path.join(dir, sub), ids.uid, ids.gid);
  }
  const host = 'bench';
  // Dovecot gives new files their UIDs in the order of their names' time and microsecond fields
  // (maildir_filename_sort_cmp), so message i gets UID i + 1, as on our side.
  let i = 0;
  for (const m of messages) {
    const secs = Math.floor(m.date.getTime() / 1000);
    const name = `${secs}.M${String(i).padStart(6, '0')}P${process.pid}.${host},S=${m.bytes.length}:2,`;
    const file = path.join(dir, 'cur', name);
    await writeFile(file, m.bytes, { mode: 0o600 });
    await chown(file, ids.uid, ids.gid);
    await utimes(file, m.date, m.date);
    i++;
  }
}

export async function startDovecot(o: {
  /** An existing Maildir owned by the `dovecot` user (writeMaildir). */
  maildir: string;
  username: string;
  password: string;
  /** Extra lines at the end of dovecot.conf (a service block, a setting). */
  extra?: string;
}): Promise<Dovecot> {
  if (process.getuid?.() !== 0) throw new Error('the Dovecot side needs root (it drops to its own users)');
  const mailUser = 'dovecot';
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-dovecot-'));
  // The master runs as root; auth, imap-login (dovenull) and imap (dovecot) reach their files through here.
  await chmod(dir, 0o755);
  for (const d of ['run', 'state', 'home']) await mkdir(path.join(dir, d), { mode: 0o755 });
  const ids = user(mailUser);
  await chown(path.join(dir, 'home'), ids.uid, ids.gid);
  const port = await freePort();
  const passwd = path.join(dir, 'passwd');
  await writeFile(passwd, `${o.username}:{PLAIN}${o.password}::::::\n`, { mode: 0o644 });
  const conf = path.join(dir, 'dovecot.conf');
  await writeFile(
    conf,
    [
      `base_dir = ${path.join(dir, 'run')}`,
      `state_dir = ${path.join(dir, 'state')}`,
      `instance_name = ${path.basename(dir)}`,
      `log_path = ${path.join(dir, 'dovecot.log')}`,
      `protocols = imap`,
      `listen = 127.0.0.1`,
      `ssl = no`,
      `disable_plaintext_auth = no`,
      `auth_mechanisms = plain login`,
      `default_internal_user = dovecot`,
      `default_login_user = dovenull`,
      `first_valid_uid = ${ids.uid}`,
      `mail_location = maildir:${o.maildir}`,
      `passdb {`,
      `  driver = passwd-file`,
      `  args = ${passwd}`,
      `}`,
      `userdb {`,
      `  driver = static`,
      `  args = uid=${mailUser} gid=${mailUser} home=${path.join(dir, 'home')}`,
      `}`,
      `service imap-login {`,
      `  inet_listener imap {`,
      `    address = 127.0.0.1`,
      `    port = ${port}`,
      `  }`,
      `  inet_listener imaps {`,
      `    port = 0`,
      `  }`,
      `}`,
      o.extra ?? '',
      '',
    ].join('\n'),
  );

  const child: ChildProcess = spawn(DOVECOT, ['-c', conf, '-F'], { stdio: ['ignore', 'inherit', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const onExit = () => child.kill('SIGKILL');
  process.on('exit', onExit);
  const readLog = () => readFile(path.join(dir, 'dovecot.log'), 'utf8').catch(() => '');
  try {
    await waitPort(port, 15_000, () =>
      child.exitCode !== null ? `dovecot exited with ${child.exitCode}: ${readFileSync(conf, 'utf8')}` : null,
    );
  } catch (err) {
    child.kill('SIGKILL');
    throw new Error(`${(err as Error).message}\n${await readLog()}`);
  }
  const { stdout } = await run(DOVECOT, ['--version']);
  const master = child.pid!;
  let stopped = false;
  return {
    port,
    version: stdout.trim(),
    username: o.username,
    password: o.password,
    pids: () => descendants(master),
    log: readLog,
    async stop() {
      if (stopped) return;
      stopped = true;
      await run(DOVEADM, ['-c', conf, 'stop']).catch(() => child.kill('SIGTERM'));
      const done = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
      if (!done) child.kill('SIGKILL');
      process.off('exit', onExit);
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** `root` and every process below it, from /proc (Linux). */
export function descendants(root: number): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(name));
      children.set(ppid, list);
    } catch {
      // gone meanwhile
    }
  }
  const out: number[] = [];
  const todo = [root];
  while (todo.length) {
    const p = todo.pop()!;
    out.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

/** Resident (RSS) and proportional (PSS: shared pages split between their users) memory of a process, bytes. */
export function memoryOf(pid: number): { rss: number; pss: number } {
  try {
    const text = readFileSync(`/proc/${pid}/smaps_rollup`, 'utf8');
    const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? 0) * 1024;
    return { rss: kb('Rss'), pss: kb('Pss') };
  } catch {
    return { rss: 0, pss: 0 };
  }
}

/** Summed memory of the given processes. */
export function memoryOfAll(pids: readonly number[]): { rss: number; pss: number; processes: number } {
  let rss = 0;
  let pss = 0;
  for (const p of pids) {
    const m = memoryOf(p);
    rss += m.rss;
    pss += m.pss;
  }
  return { rss, pss, processes: pids.length };
}
