// Fixtures of the outbound transport security tests (issue 19): a private CA made with openssl, leaf
// certificates for host names signed by it, and a loopback https server answering MTA-STS policy
// requests per Host header, counting them.
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';

const run = promisify(execFile);

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Ca {
  dir: string;
  /** Path of the CA certificate (for SVC_EXTRA_CA_CERTS). */
  caPath: string;
  /** A certificate signed by the CA for these DNS names (the first is the CN). */
  leaf(names: string[]): Promise<{ cert: Buffer; key: Buffer; certPath: string }>;
}

let serial = 0;

export async function makeCa(t: Teardown): Promise<Ca> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'svc-ca-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  const caPath = path.join(dir, 'ca.crt');
  const caKey = path.join(dir, 'ca.key');
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  await run('openssl', [
    'req',
    '-x509',
    ...ec,
    '-keyout',
    caKey,
    '-out',
    caPath,
    '-days',
    '2',
    '-subj',
    '/CN=svc test CA',
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return {
    dir,
    caPath,
    async leaf(names) {
      const base = path.join(dir, `leaf${++serial}`);
      await run('openssl', [
        'req',
        '-new',
        ...ec,
        '-keyout',
        `${base}.key`,
        '-out',
        `${base}.csr`,
        '-subj',
        `/CN=${names[0]}`,
        '-addext',
        `subjectAltName=${names.map((n) => `DNS:${n}`).join(',')}`,
      ]);
      await run('openssl', [
        'x509',
        '-req',
        '-in',
        `${base}.csr`,
        '-CA',
        caPath,
        '-CAkey',
        caKey,
        '-set_serial',
        String(1000 + serial),
        '-days',
        '2',
        '-copy_extensions',
        'copy',
        '-out',
        `${base}.crt`,
      ]);
      return { cert: await readFile(`${base}.crt`), key: await readFile(`${base}.key`), certPath: `${base}.crt` };
    },
  };
}

export interface PolicyServer {
  port: number;
  /** Policy text per host (mta-sts.<domain>); a host without one gets a 404. */
  policies: Map<string, string>;
  /** Requests received, per host. */
  requests: string[];
  countFor(host: string): number;
}

export async function startPolicyServer(t: Teardown, tls: { cert: Buffer; key: Buffer }): Promise<PolicyServer> {
  const ps: PolicyServer = {
    port: 0,
    policies: new Map(),
    requests: [],
    countFor: (host) => ps.requests.filter((h) => h === host).length,
  };
  const server = https.createServer({ cert: tls.cert, key: tls.key }, (req, res) => {
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    ps.requests.push(host);
    const policy = ps.policies.get(host);
    if (req.url !== '/.well-known/mta-sts.txt' || policy === undefined) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { 'content-type': 'text/plain' }).end(policy);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  ps.port = (server.address() as AddressInfo).port;
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  return ps;
}

/** An RFC 8461 §3.2 policy file. */
export const policyText = (mode: string, mx: string[], maxAge = 86400) =>
  ['version: STSv1', `mode: ${mode}`, ...mx.map((m) => `mx: ${m}`), `max_age: ${maxAge}`, ''].join('\r\n');
