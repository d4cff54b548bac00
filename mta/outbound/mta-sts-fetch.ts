// Fetches an MTA-STS policy (RFC 8461 §3.3): GET https://mta-sts.<domain>/.well-known/mta-sts.txt with
// the certificate verified for that name (system roots plus SVC_EXTRA_CA_CERTS), no redirects, at most
// 64 KB and a deadline. The host is resolved through our resolver (SVC_DNS_SERVERS, never the OS), and
// the connection goes to the address checked, like a webhook's (mta/webhooks/post.ts).
import https from 'node:https';
import net from 'node:net';
import type { LookupFunction } from 'node:net';
import type { SecureContext } from 'node:tls';
import type { Resolver } from '../../mail/resolver.js';
import { refusalOf } from '../../mail/webhook-target.js';
import type { FetchResult } from '../../mail/mta-sts.js';
import { certificateResult } from '../../mail/tls-report.js';

export interface StsFetchOptions {
  resolver: Resolver;
  /** Roots the policy host's certificate must chain to (system roots + SVC_EXTRA_CA_CERTS). */
  secureContext: SecureContext;
  /** SVC_MTA_STS_PORT: 443 outside tests. */
  port: number;
  /** SVC_ALLOW_PRIVATE_MX: a policy host on a private address is refused like such an MX host. */
  allowPrivate: boolean;
  /** RFC 8461 §3.3 suggests 60 s; a delivery waits for this, so less. */
  timeoutMs?: number;
  /** RFC 8461 §3.3: senders may limit the body; 64 KB is what the RFC considers plenty. */
  maxBytes?: number;
}

const USER_AGENT = 'svc-mail-mta-sts/1';

/** The address to connect to for `host`, through our resolver; a non-public one refused unless allowed. */
export async function addressOf(resolver: Resolver, host: string, allowPrivate: boolean): Promise<string> {
  const found: string[] = [];
  for (const lookup of [resolver.a(host), resolver.aaaa(host)]) {
    try {
      found.push(...(await lookup).filter((a) => net.isIP(a)));
    } catch {
      // absent or failed: the other family may answer
    }
  }
  if (!found.length) throw new Error(`${host} does not resolve`);
  const usable = allowPrivate ? found : found.filter((a) => !refusalOf(a));
  if (!usable.length) throw new Error(`${host} resolves only to non-public addresses (${found.join(', ')})`);
  return usable[0]!;
}

export function createStsFetcher(o: StsFetchOptions): (domain: string) => Promise<FetchResult> {
  const timeoutMs = o.timeoutMs ?? 10_000;
  const maxBytes = o.maxBytes ?? 64 * 1024;
  return async (domain) => {
    const host = `mta-sts.${domain}`;
    let address: string;
    try {
      address = await addressOf(o.resolver, host, o.allowPrivate);
    } catch (err) {
      return { ok: false, error: (err as Error).message };
    }
    const family = net.isIPv6(address) ? 6 : 4;
    const lookup: LookupFunction = (_h, options, callback) => {
      if ((options as { all?: boolean }).all)
        (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [
          { address, family },
        ]);
      else callback(null, address, family);
    };
    return new Promise<FetchResult>((resolve) => {
      let settled = false;
      const done = (r: FetchResult) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        req.destroy();
        resolve(r);
      };
      const req = https.request(
        {
          host,
          port: o.port,
          path: '/.well-known/mta-sts.txt',
          method: 'GET',
          servername: host,
          secureContext: o.secureContext,
          rejectUnauthorized: true,
          lookup,
          agent: false,
          headers: { 'user-agent': USER_AGENT, accept: 'text/plain' },
          // secureContext reaches tls.connect with the other options; node's types leave it out.
        } as https.RequestOptions,
        (res) => {
          // RFC 8461 §3.3: only a 200 is a policy; redirects are not followed.
          if (res.statusCode !== 200) return done({ ok: false, error: `${host} answered HTTP ${res.statusCode}` });
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size > maxBytes) return done({ ok: false, error: `${host}: policy larger than ${maxBytes} bytes` });
            chunks.push(c);
          });
          res.on('end', () => done({ ok: true, body: Buffer.concat(chunks).toString('utf8') }));
          res.on('error', (err) => done({ ok: false, error: `${host}: ${err.message}` }));
        },
      );
      const timer = setTimeout(
        () => done({ ok: false, error: `${host}: no policy within ${timeoutMs} ms` }),
        timeoutMs,
      );
      req.on('error', (err: Error & { code?: string }) =>
        done({
          ok: false,
          error: `${host}: ${err.message}`,
          ...(certificateResult(err.code) ? { webpki: true } : {}),
        }),
      );
      req.end();
    });
  };
}
