// A private Debian Postfix that relays everything it receives to one SMTP server (our MX listener), as a
// sending organization's outbound MTA would: its own main.cf, master.cf, queue and data under a temp dir,
// the system instance never read or touched. The relay peer of test/helpers/postfix.ts's receiving peer
// (and of bench/postfix.ts, which measures instead of testing). Needs root (postfix start).
//
//   const relay = await startPostfixRelay(t, { to: svc.running.ports.smtp! });
//   ... submit to 127.0.0.1:relay.port; Postfix queues it and delivers it to our MX ...
import type { Test } from 'tap';
import { execFile } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { startOnFreePort } from './postfix.js';
import { waitFor } from './wait-for.js';

const run = promisify(execFile);
const POSTFIX = '/usr/sbin/postfix';

export interface PostfixRelay {
  port: number;
  hostname: string;
  log(): Promise<string>;
  stop(): Promise<void>;
}

async function ids(): Promise<{ uid: number; gid: number }> {
  const line = (await readFile('/etc/passwd', 'utf8')).split('\n').find((l) => l.startsWith('postfix:'));
  const f = line?.split(':');
  if (!f) throw new Error('startPostfixRelay: no postfix user (apt-get install postfix)');
  return { uid: Number(f[2]), gid: Number(f[3]) };
}

export async function startPostfixRelay(
  t: Pick<Test, 'teardown'>,
  o: { to: number; hostname?: string },
): Promise<PostfixRelay> {
  if (process.getuid?.() !== 0) throw new Error('startPostfixRelay: must run as root (postfix start)');
  const hostname = o.hostname ?? 'relay.sender.test';
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-postfix-relay-'));
  const etc = path.join(dir, 'etc');
  const queue = path.join(dir, 'queue');
  const u = await ids();
  await chmod(dir, 0o755); // the daemons run as postfix and chdir into queue/
  await mkdir(etc);
  await mkdir(queue); // `postfix start` makes its subdirectories
  await mkdir(path.join(dir, 'data'), { mode: 0o700 });
  await chown(path.join(dir, 'data'), u.uid, u.gid);
  const main: Record<string, string> = {
    compatibility_level: '3.6',
    config_directory: etc,
    queue_directory: queue,
    data_directory: path.join(dir, 'data'),
    mail_owner: 'postfix',
    setgid_group: 'postdrop',
    syslog_name: `postfix-${path.basename(dir)}`,
    maillog_file: path.join(dir, 'maillog'),
    maillog_file_prefixes: dir,
    myhostname: hostname,
    mydestination: '',
    inet_interfaces: '127.0.0.1',
    inet_protocols: 'ipv4',
    mynetworks: '127.0.0.0/8',
    smtpd_relay_restrictions: 'permit_mynetworks, reject',
    smtpd_peername_lookup: 'no',
    smtp_dns_support_level: 'disabled',
    relayhost: `[127.0.0.1]:${o.to}`,
    alias_maps: '',
    alias_database: '',
    local_recipient_maps: '',
    local_transport: 'error:5.7.1 no local delivery',
    biff: 'no',
    in_flow_delay: '0',
  };
  await writeFile(
    path.join(etc, 'main.cf'),
    Object.entries(main)
      .map(([k, v]) => `${k} = ${v}\n`)
      .join(''),
  );
  const log = () => readFile(path.join(dir, 'maillog'), 'utf8').catch(() => '');
  let stopped = false;
  const stop = async () => {
    if (stopped) return;
    stopped = true;
    await run(POSTFIX, ['-c', etc, 'stop']).catch(() => run(POSTFIX, ['-c', etc, 'abort']).catch(() => {}));
    await waitFor(
      async () => {
        const pid = Number((await readFile(path.join(queue, 'pid', 'master.pid'), 'utf8').catch(() => '')).trim());
        if (!pid) return true;
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      { timeoutMs: 10_000, what: 'postfix relay to stop' },
    ).catch(() => undefined);
  };
  t.teardown(async () => {
    await stop();
    await rm(dir, { recursive: true, force: true });
  });
  const port = await startOnFreePort(etc, queue, ['smtp      unix - - n - - smtp', 'relay     unix - - n - - smtp'], {
    deadline: Date.now() + 30_000,
    logTail: log,
    what: 'startPostfixRelay',
  });
  // The master binds the port itself, a moment after `start` returns.
  const accepting = () =>
    new Promise<boolean>((resolve) => {
      const s = net.connect(port, '127.0.0.1');
      s.once('connect', () => {
        s.destroy();
        resolve(true);
      });
      s.once('error', () => resolve(false));
    });
  await waitFor(accepting, { timeoutMs: 15_000, everyMs: 25, what: `postfix relay on port ${port}` });
  return { port, hostname, log, stop };
}
