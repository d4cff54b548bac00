// Debian's OpenDKIM as a milter of a private Postfix (`--opendkim`): Postfix signing as our MTA does, one
// RSA-2048 signature a message with relaxed/relaxed canonicalization, so that the two sides do the same work.
// Its own config, key and pid file in a temp dir; it listens on a loopback TCP port (`smtpd_milters`).
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { existsSync } from 'node:fs';
import { chmod, chown, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { freePort, processes, user, waitPort } from './util.js';

const OPENDKIM = '/usr/sbin/opendkim';

export interface OpenDkim {
  /** The Postfix setting that hands each message to it. */
  milter: string;
  selector: string;
  /** The DNS TXT record of the public key (at `<selector>._domainkey.<domain>`). */
  txt: string;
  /** CPU seconds of the opendkim process so far. */
  cpuSeconds(): number;
  stop(): Promise<void>;
}

export async function startOpenDkim(domain: string): Promise<OpenDkim> {
  // opendkim refuses a config or key under a directory others may write to, as /tmp is: /run is root's alone.
  const dir = await mkdtemp(path.join(existsSync('/run') ? '/run' : os.tmpdir(), 'svc-bench-opendkim-'));
  // Searchable, for the opendkim user it drops to before it reads the key.
  await chmod(dir, 0o711);
  const ids = user('opendkim');
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyFile = path.join(dir, 'key.pem');
  await writeFile(keyFile, privateKey.export({ type: 'pkcs1', format: 'pem' }), { mode: 0o600 });
  // It drops to the opendkim user (UserID) before it reads the key.
  await chown(keyFile, ids.uid, ids.gid);
  const port = await freePort();
  const selector = 'odkim';
  const conf = path.join(dir, 'opendkim.conf');
  await writeFile(
    conf,
    [
      'Syslog no',
      'Background no',
      'Mode s',
      `Domain ${domain}`,
      `Selector ${selector}`,
      `KeyFile ${keyFile}`,
      `Socket inet:${port}@127.0.0.1`,
      `PidFile ${path.join(dir, 'opendkim.pid')}`,
      'UserID opendkim',
      'Canonicalization relaxed/relaxed',
      'SignatureAlgorithm rsa-sha256',
      // What Postfix relays for loopback clients is signed (the default list, written out).
      'InternalHosts 127.0.0.1',
      '',
    ].join('\n'),
  );
  const child: ChildProcess = spawn(OPENDKIM, ['-f', '-x', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
  await waitPort(port, 10_000, () => (child.exitCode !== null ? `opendkim exited: ${stderr}` : null));
  const der = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  return {
    milter: `inet:127.0.0.1:${port}`,
    selector,
    txt: `v=DKIM1; k=rsa; p=${der}`,
    cpuSeconds: () =>
      processes()
        .filter((p) => p.pid === child.pid)
        .reduce((sum, p) => sum + p.cpu, 0),
    async stop() {
      if (child.exitCode === null) {
        const gone = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await gone;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
