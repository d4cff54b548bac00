// A private Debian Dovecot for the IMAP bench (bench/imap.ts): its own config, run, state and log directories
// and one user's Maildir under a temp dir, started with `dovecot -c <conf> -F`, so the system instance
// (/etc/dovecot) is never read or touched. Needs root (Dovecot drops to its own users) and dovecot-imapd.
//
// Dovecot's defaults, but for what a loopback bench needs: no TLS, plaintext LOGIN allowed, one user in a
// passwd-file, the mail owned by the `dovecot` user; and room for 1,000 connections (`default_process_limit`
// 100 and `mail_max_userip_connections` 10 would refuse them). Each IMAP connection stays one `imap` process
// (`service imap { client_limit = 1 }`, the default), as Dovecot is normally run.
import { spawn, type ChildProcess } from 'node:child_process';
import { chown, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort, user, waitPort } from './util.js';

const DOVECOT = '/usr/sbin/dovecot';

export interface Dovecot {
  port: number;
  version: string;
  /** Resident memory of every process of the instance now, in bytes. */
  rssBytes(): Promise<number>;
  stop(): Promise<void>;
}

/** Writes `messages` into a fresh Maildir and starts Dovecot over it for `login`:`password`. */
export async function startDovecot(login: string, password: string, messages: readonly Buffer[]): Promise<Dovecot> {
  if (process.getuid?.() !== 0) throw new Error('the Dovecot side needs root');
  const ids = user('dovecot');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-dovecot-'));
  const maildir = path.join(dir, 'Maildir');
  for (const sub of ['cur', 'new', 'tmp']) await mkdir(path.join(maildir, sub), { recursive: true });
  // Maildir names (https://cr.yp.to/proto/maildir.html): unique, with Dovecot's ,S=<size> so it need not stat.
  const base = Math.floor(Date.now() / 1000) - messages.length;
  await Promise.all(
    messages.map((m, i) => writeFile(path.join(maildir, 'cur', `${base + i}.M${i}P1.bench,S=${m.length}:2,`), m)),
  );
  for (const p of [dir, maildir, ...['cur', 'new', 'tmp'].map((s) => path.join(maildir, s))])
    await chown(p, ids.uid, ids.gid);
  await Promise.all(
    (await readdir(path.join(maildir, 'cur'))).map((f) => chown(path.join(maildir, 'cur', f), ids.uid, ids.gid)),
  );
  const port = await freePort();
  await writeFile(path.join(dir, 'passwd'), `${login}:{PLAIN}${password}\n`);
  const conf = path.join(dir, 'dovecot.conf');
  await writeFile(
    conf,
    `base_dir = ${dir}/run
state_dir = ${dir}/state
log_path = ${dir}/dovecot.log
protocols = imap
listen = 127.0.0.1
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
default_internal_user = dovecot
default_internal_group = dovecot
default_login_user = dovenull
default_process_limit = 1200
default_client_limit = 5000
mail_max_userip_connections = 2000
first_valid_uid = ${ids.uid}
first_valid_gid = ${ids.gid}
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%u ${dir}/passwd
}
userdb {
  driver = static
  args = uid=${ids.uid} gid=${ids.gid} home=${dir}/home
}
mail_location = maildir:${maildir}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = ${port}
  }
  inet_listener imaps {
    port = 0
  }
}
service imap {
  process_limit = 1200
}
`,
  );
  await mkdir(path.join(dir, 'home'), { recursive: true });
  await chown(path.join(dir, 'home'), ids.uid, ids.gid);
  // Its own process group, so that its processes are told apart from everything else.
  const master: ChildProcess = spawn(DOVECOT, ['-c', conf, '-F'], { stdio: 'ignore', detached: true });
  const exited = new Promise<void>((resolve) => master.once('exit', () => resolve()));
  try {
    await waitPort(port, 15_000, () => (master.exitCode !== null ? `dovecot exited with ${master.exitCode}` : null));
  } catch (err) {
    const log = await readFile(path.join(dir, 'dovecot.log'), 'utf8').catch(() => '');
    master.kill('SIGKILL');
    throw new Error(`dovecot did not start: ${String(err)}\n${log}`);
  }
  const version = (await run(DOVECOT, ['--version'])).trim().split(' ')[0] ?? '';
  const pgrp = master.pid!;
  return {
    port,
    version,
    rssBytes: () => rssOfGroup(pgrp),
    async stop() {
      try {
        process.kill(-pgrp, 'SIGTERM');
      } catch {
        // already gone
      }
      await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
      try {
        process.kill(-pgrp, 'SIGKILL');
      } catch {
        // gone
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** The summed VmRSS of every process in a process group (Linux /proc). */
export async function rssOfGroup(pgrp: number): Promise<number> {
  let total = 0;
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = await readFile(`/proc/${name}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(f[2]) !== pgrp) continue;
      total += await rssOf(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/** One process's VmRSS in bytes (0 once gone). */
export async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
  const kb = /^VmRSS:\s+(\d+) kB/m.exec(status)?.[1];
  return kb ? Number(kb) * 1024 : 0;
}

function run(cmd: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const c = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    c.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
    c.once('error', reject);
    c.once('exit', () => resolve(out));
  });
}
