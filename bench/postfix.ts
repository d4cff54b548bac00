// A private Debian Postfix that relays everything it receives to the sink: its own config, queue and
// data directories under a temp dir, started and stopped with `postfix -c <dir> start|stop`, so the
// system instance (/etc/postfix) is never read or touched. Needs root (postfix start).
//
// Settings are Postfix's defaults except what a loopback relay needs: no DNS (the relayhost is an
// address literal and client names are not looked up), no chroot, no local delivery; plus an explicit
// default_destination_concurrency_limit (20, its default: up to 20 parallel connections to the sink,
// more than the 8 our MTA opens per destination) and the caller's overrides.
import { execFile, execFileSync } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, readFile, readdir, rm, utimes, writeFile } from 'node:fs/promises';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startOnFreePort } from '../test/helpers/postfix.js';
import { processes, sleep, user, waitPort } from './util.js';

const run = promisify(execFile);
const POSTFIX = '/usr/sbin/postfix';

export interface Relay {
  port: number;
  dir: string;
  version: string;
  /** CPU seconds used so far by the whole instance: every live Postfix process plus those that exited. */
  cpuSeconds(): number;
  log(): Promise<string>;
  stop(): Promise<void>;
}

export async function startRelay(
  sinkPort: number,
  overrides: Record<string, string> = {},
  services: readonly string[] = ['smtp      unix - - n - - smtp', 'relay     unix - - n - - smtp'],
): Promise<Relay> {
  if (process.getuid?.() !== 0) throw new Error('the Postfix side needs root (postfix start)');
  const ids = user('postfix');
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-postfix-'));
  const etc = path.join(dir, 'etc');
  // The daemons run as postfix and chdir into queue/: the dir must be searchable.
  await chmod(dir, 0o755);
  await mkdir(etc);
  await mkdir(path.join(dir, 'queue')); // `postfix start` creates its subdirectories
  await mkdir(path.join(dir, 'data'), { mode: 0o700 });
  await chown(path.join(dir, 'data'), ids.uid, ids.gid);

  const main: Record<string, string> = {
    compatibility_level: '3.6',
    config_directory: etc,
    queue_directory: path.join(dir, 'queue'),
    data_directory: path.join(dir, 'data'),
    mail_owner: 'postfix',
    setgid_group: 'postdrop',
    syslog_name: `postfix-${path.basename(dir)}`,
    maillog_file: path.join(dir, 'maillog'),
    maillog_file_prefixes: dir, // the default allows only /var and /dev/stdout
    myhostname: 'relay.bench.test',
    mydestination: '',
    inet_interfaces: '127.0.0.1',
    inet_protocols: 'ipv4',
    mynetworks: '127.0.0.0/8',
    smtpd_relay_restrictions: 'permit_mynetworks, reject',
    smtpd_peername_lookup: 'no',
    smtp_dns_support_level: 'disabled',
    relayhost: `[127.0.0.1]:${sinkPort}`,
    default_destination_concurrency_limit: '20',
    alias_maps: '',
    alias_database: '',
    local_recipient_maps: '',
    local_transport: 'error:5.7.1 no local delivery',
    biff: 'no',
    ...overrides,
  };
  await writeFile(
    path.join(etc, 'main.cf'),
    Object.entries(main)
      .map(([k, v]) => `${k} = ${v}\n`)
      .join(''),
  );

  let stopped = false;
  // If the bench dies between start and stop, do not leave a master running.
  const onExit = () => {
    if (!stopped)
      try {
        execFileSync(POSTFIX, ['-c', etc, 'abort'], { stdio: 'ignore' });
      } catch {
        /* not running */
      }
  };
  process.on('exit', onExit);
  // On a port free when picked, written into master.cf, started again on another when something took it first.
  const port = await startOnFreePort(etc, path.join(dir, 'queue'), services, {
    deadline: Date.now() + 30_000,
    logTail: async () =>
      (await readFile(path.join(dir, 'maillog'), 'utf8').catch(() => '')).split('\n').slice(-20).join('\n'),
    what: 'the bench relay',
  });
  await waitPort(port, 10_000);
  const { stdout } = await run('/usr/sbin/postconf', ['-c', etc, '-h', 'mail_version']);

  return {
    port,
    dir,
    version: stdout.trim(),
    cpuSeconds() {
      // The master runs in a session of its own, so every daemon shares its process group; the master
      // reaps daemons that exit (max_use, max_idle), which adds their time to its own children's time.
      const master = Number(readFileSync(path.join(dir, 'queue', 'pid', 'master.pid'), 'utf8').trim());
      return processes()
        .filter((p) => p.pgrp === master)
        .reduce((sum, p) => sum + p.cpu + (p.pid === master ? p.reapedCpu : 0), 0);
    },
    log: () => readFile(path.join(dir, 'maillog'), 'utf8').catch(() => ''),
    async stop() {
      if (stopped) return;
      await run(POSTFIX, ['-c', etc, 'stop']).catch(() => run(POSTFIX, ['-c', etc, 'abort']).catch(() => {}));
      stopped = true;
      process.off('exit', onExit);
      // `postfix stop` returns once the master is told; wait for it to go before removing its queue.
      for (let i = 0; i < 100; i++) {
        const pid = await readFile(path.join(dir, 'queue', 'pid', 'master.pid'), 'utf8').catch(() => '');
        if (!pid.trim() || !isAlive(Number(pid))) break;
        await sleep(50);
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export interface MaildirPostfix extends Relay {
  /** Messages delivered so far: files in the Maildir's new/. */
  delivered(): Promise<number>;
}

/**
 * A private Postfix that takes mail for `domain` and delivers each recipient listed in `mailboxes` to
 * a Maildir of its own with virtual(8) (the inbound benchmark's peer): smtpd → cleanup (the queue file
 * is fsynced before the 250) → qmgr → virtual (the Maildir file is fsynced before it is moved into
 * new/). Everything else is startRelay's loopback setup; `overrides` come last.
 */
export async function startMaildir(
  domain: string,
  localparts: readonly string[],
  overrides: Record<string, string> = {},
): Promise<MaildirPostfix> {
  const ids = user('postfix');
  // virtual(8) creates the Maildirs under the base as the postfix user: the base is theirs, the way there searchable.
  const base = await mkdtemp(path.join(os.tmpdir(), 'svc-bench-maildir-'));
  await chmod(base, 0o700);
  await chown(base, ids.uid, ids.gid);
  // texthash: read as text at start, no postmap(1) needed (a trailing slash means Maildir format).
  const maps = path.join(base, 'virtual_mailbox_maps');
  await writeFile(maps, localparts.map((l) => `${l}@${domain} ${l}/\n`).join(''));
  // Postfix re-reads a table until its mtime is in the past, 300 ms a round (dict_load_file): date it back.
  const past = new Date(Date.now() - 60_000);
  await utimes(maps, past, past);
  let relay: Relay;
  try {
    relay = await startRelay(
      0,
      {
        relayhost: '',
        default_transport: 'error:5.7.1 no relaying',
        relay_transport: 'error:5.7.1 no relaying',
        virtual_mailbox_domains: domain,
        virtual_mailbox_base: base,
        virtual_mailbox_maps: `texthash:${maps}`,
        virtual_mailbox_limit: '0',
        virtual_uid_maps: `static:${ids.uid}`,
        virtual_gid_maps: `static:${ids.gid}`,
        ...overrides,
      },
      ['virtual   unix - n n - - virtual'],
    );
  } catch (err) {
    await rm(base, { recursive: true, force: true });
    throw err;
  }
  const newDir = path.join(base, localparts[0] ?? '', 'new');
  return {
    ...relay,
    delivered: () =>
      readdir(newDir).then(
        (names) => names.length,
        () => 0,
      ),
    async stop() {
      await relay.stop();
      await rm(base, { recursive: true, force: true });
    },
  };
}
