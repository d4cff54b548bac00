// `svc doctor <domain>`: which DNS records of a claimed domain are published, and which are missing or
// wrong. For operators and customers alike: it reads the claim and its capabilities from the database
// (no HTTP, so it works while the API is down) and asks the DNS of SVC_DNS_SERVERS, bypassing caches.
//
// The expected records come from the same builders the API answers with (mail/dns-records.ts),
// so what doctor checks is exactly what the console told the customer to publish.
//
// `svc doctor --ips`: for each address of SVC_SOURCE_ADDRESSES, forward-confirmed reverse DNS (FCrDNS): its
// PTR names the EHLO name its sessions give, and that name's A/AAAA records hold the address again (the
// records docs/operations.md "Dedicated IPs" tells the operator to publish). Receivers check both.
//
// `svc doctor --platform`: the records platform mail (password resets, invitations, TLS reports) needs, for the
// notify domain (SVC_NOTIFY_FROM's): the platform DKIM keys, SPF and DMARC there, the operator's `_spf.` record,
// and FCrDNS of SVC_HOSTNAME's addresses (docs/operations.md, "Platform mail"). Every one is required.
//
// Exit codes: 0 every required record is right; 1 a required record is missing, wrong or could not
// be looked up; 2 bad usage, an unknown domain, or no database to read (or, with --ips, no address; with
// --platform, no platform key yet: the MTA makes it at its first start).
import { stat } from 'node:fs/promises';
import { isIP } from 'node:net';
import path from 'node:path';
import { parseArgs } from 'node:util';
import pino from 'pino';
import type { Config } from '../config/schema.js';
import { systemClock } from '../config/context.js';
import { normalizeDomain } from '../mail/domain-names.js';
import {
  inboundRecords,
  operatorSpfHost,
  operatorSpfRecord,
  outboundRecords,
  ownershipRecord,
  type DnsRecord,
} from '../mail/dns-records.js';
import { publishedKey } from '../mail/dkim-keys.js';
import { createResolver } from '../mail/dns.js';
import { DnsError, type Resolver } from '../mail/resolver.js';
import { openDb } from '../storage/index.js';
import { isPgError, type Db } from '../storage/pg/client.js';
import { notifyDomainOf, platformKeys, type PlatformKey } from '../storage/platform-dkim.js';
import { sourceAddressFor } from '../mta/outbound/source-address.js';
import {
  findClaimByDomain,
  listInbound,
  listOutbound,
  type Claim,
  type Inbound,
  type Outbound,
} from '../storage/pg/domains.js';

export const DOCTOR_USAGE =
  'usage: svc doctor <domain>   check the DNS records of a claimed domain\n' +
  '       svc doctor --ips      check the reverse DNS (PTR and back) of each address of SVC_SOURCE_ADDRESSES\n' +
  '       svc doctor --platform check the records platform mail (password resets, invitations) needs';

/** Postgres: relation does not exist (the database was never migrated). */
const PG_UNDEFINED_TABLE = '42P01';

/**
 * required: the domain does not work without it. recommended: deliverability (SPF, DMARC); missing
 * ones are reported but do not fail the check. settled: needed once and done (the ownership TXT of a
 * verified claim; a subdomain claim is verified from the start and never needed one).
 */
type Need = 'required' | 'recommended' | 'settled';

/** How a published record is compared with the expected one. */
type Match = 'exact' | 'dkim' | 'spf' | 'dmarc' | 'mx';

interface Expected {
  label: string;
  record: DnsRecord;
  need: Need;
  match: Match;
}

type Verdict =
  | { kind: 'ok' }
  | { kind: 'missing' }
  | { kind: 'wrong'; found: string[]; why?: string }
  | { kind: 'unanswered'; failure: string };

/** The records a claim and its capabilities ask for, in the order a customer would publish them. */
export function expectedRecords(
  config: Readonly<Config>,
  claim: Claim,
  outbound: Outbound[],
  inbound: Inbound[],
): { section: string; records: Expected[] }[] {
  const sections = [
    {
      section: `claim ${claim.domain} (${claim.status})`,
      records: [
        {
          label: 'ownership',
          record: ownershipRecord(claim),
          need: claim.status === 'verified' ? 'settled' : 'required',
          match: 'exact',
        } as Expected,
      ],
    },
  ];
  for (const o of outbound) {
    const r = outboundRecords(o, config).dnsRecords;
    const records: Expected[] = [{ label: 'DKIM', record: r.dkim, need: 'required', match: 'dkim' }];
    if (r.dkimEd25519) records.push({ label: 'DKIM Ed25519', record: r.dkimEd25519, need: 'required', match: 'dkim' });
    records.push(
      // Bounces come back through the return path's MX (docs/decisions.md #10); without it they are lost.
      { label: 'return-path MX', record: r.returnPath.mx, need: 'required', match: 'mx' },
      { label: 'return-path SPF', record: r.returnPath.spf, need: 'recommended', match: 'spf' },
      { label: 'SPF', record: r.spf, need: 'recommended', match: 'spf' },
      { label: 'DMARC', record: r.dmarc, need: 'recommended', match: 'dmarc' },
    );
    sections.push({ section: `sending from ${o.domain} (${o.status})`, records });
  }
  for (const i of inbound) {
    sections.push({
      section: `receiving at ${i.domain} (${i.status})`,
      records: [{ label: 'MX', record: inboundRecords(i, config).mx, need: 'required', match: 'mx' }],
    });
  }
  return sections;
}

/** RFC 7208 §4.5: an SPF record is a TXT record starting with "v=spf1" followed by a space or its end. */
const isSpf = (v: string) => /^v=spf1(\s|$)/i.test(v.trim());
/** RFC 7489 §6.4: a DMARC record starts with the tag v=DMARC1. */
const isDmarc = (v: string) => /^v\s*=\s*DMARC1\s*(;|$)/i.test(v.trim());
/** The terms of an SPF record past its version, lower case (RFC 7208 §4.6.1: terms are space-separated). */
const spfTerms = (v: string) => v.trim().toLowerCase().split(/\s+/).slice(1);

/** Compares what is published with what is expected; `found` is every value at the host and type. */
export function judge(e: Expected, found: string[]): Verdict {
  const want = e.record.value;
  switch (e.match) {
    case 'exact':
      return found.some((v) => v.trim() === want)
        ? { kind: 'ok' }
        : found.length
          ? { kind: 'wrong', found }
          : { kind: 'missing' };
    case 'dkim': {
      // RFC 6376 §3.6.1: what matters is the key (p=); tag order and spacing may differ.
      const key = publishedKey(want);
      return found.some((v) => publishedKey(v) === key)
        ? { kind: 'ok' }
        : found.length
          ? { kind: 'wrong', found }
          : { kind: 'missing' };
    }
    case 'spf': {
      // Other TXT records at the name (site verifications) are none of SPF's business.
      const spf = found.filter(isSpf);
      if (!spf.length) return { kind: 'missing' };
      if (spf.length > 1)
        return { kind: 'wrong', found: spf, why: 'RFC 7208 §4.5: more than one SPF record is an error' };
      // Our mechanisms merged into the customer's own record (include:…, ip4:…) count as published.
      const have = new Set(spfTerms(spf[0] as string));
      const ours = spfTerms(want).filter((term) => !/^[-~?+]?all$/.test(term));
      return ours.every((term) => have.has(term) || have.has(`+${term}`))
        ? { kind: 'ok' }
        : { kind: 'wrong', found: spf };
    }
    case 'dmarc': {
      // The customer's own policy (p=quarantine, rua=…) is as good as the one we suggest.
      const dmarc = found.filter(isDmarc);
      if (!dmarc.length) return { kind: 'missing' };
      if (dmarc.length > 1)
        return { kind: 'wrong', found: dmarc, why: 'RFC 7489 §6.6.3: more than one DMARC record means none applies' };
      return { kind: 'ok' };
    }
    case 'mx':
      return found.includes(want.toLowerCase())
        ? { kind: 'ok' }
        : found.length
          ? { kind: 'wrong', found }
          : { kind: 'missing' };
  }
}

/** Looks (host, type) up once per run, fresh; absent records are an empty list, failures a DnsError. */
function lookups(resolver: Resolver) {
  const memo = new Map<string, Promise<string[]>>();
  return (host: string, type: 'TXT' | 'MX' | 'CNAME'): Promise<string[]> => {
    const key = `${type} ${host}`;
    let p = memo.get(key);
    if (!p) {
      const q =
        type === 'TXT'
          ? resolver.txt(host, { fresh: true })
          : type === 'MX'
            ? resolver.mx(host, { fresh: true }).then((mxs) => mxs.map((m) => m.exchange))
            : resolver.cname(host, { fresh: true }).then((c) => (c ? [c] : []));
      p = q.catch((err: unknown) => {
        if (err instanceof DnsError && err.absent) return [];
        throw err;
      });
      memo.set(key, p);
    }
    return p;
  };
}

const clip = (s: string, max = 80) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

function statusText(v: Verdict, need: Need): string {
  switch (v.kind) {
    case 'ok':
      return 'ok';
    case 'missing':
      return need === 'recommended'
        ? 'missing (recommended)'
        : need === 'settled'
          ? 'missing (no longer needed: verified)'
          : 'missing';
    case 'wrong': {
      const found = v.found.map((f) => JSON.stringify(clip(f))).join(', ');
      const notes = [
        v.why,
        need === 'recommended' ? 'recommended' : need === 'settled' ? 'no longer needed: verified' : null,
      ]
        .filter(Boolean)
        .join('; ');
      return `wrong (found ${found})${notes ? ` (${notes})` : ''}`;
    }
    case 'unanswered':
      return `unknown (DNS ${v.failure}: no answer, try again)`;
  }
}

const shown = (r: DnsRecord) => (r.type === 'MX' ? `${r.priority ?? 10} ${r.value}` : JSON.stringify(r.value));

/** The owner name of an address's PTR record: in-addr.arpa (RFC 1035 §3.5) or ip6.arpa nibbles (RFC 3596 §2.5). */
export function reverseName(address: string): string {
  if (isIP(address) === 4) return `${address.split('.').reverse().join('.')}.in-addr.arpa`;
  // Eight groups of four hex digits, whatever the written form (`::` compression, an embedded IPv4 tail).
  const hex = Buffer.alloc(16);
  const url = new URL(`http://[${address}]`).hostname.slice(1, -1);
  const [head = '', tail = ''] = url.split('::');
  const groups = (g: string) => (g ? g.split(':') : []);
  const h = groups(head);
  const tl = groups(tail);
  const all = url.includes('::') ? [...h, ...Array<string>(8 - h.length - tl.length).fill('0'), ...tl] : h;
  all.forEach((g, i) => hex.writeUInt16BE(parseInt(g, 16), i * 2));
  return `${[...hex.toString('hex')].reverse().join('.')}.ip6.arpa`;
}

/** An address in one text form (RFC 5952 for IPv6), so that written forms compare equal. */
const canonical = (a: string) => (isIP(a) === 6 ? new URL(`http://[${a}]`).hostname.slice(1, -1) : a);

export interface IpCheck {
  address: string;
  ehlo: string;
  /** null: the PTR names the EHLO name, and the name resolves back to the address. */
  problem: string | null;
  /** The problem is a lookup that got no answer (try again), not a wrong record. */
  unanswered?: boolean;
}

/** FCrDNS of one source address (RFC 8601 §3 "iprev"; what receivers check of a sending address). */
export async function checkIp(resolver: Resolver, address: string, ehlo: string): Promise<IpCheck> {
  const rev = reverseName(address);
  const failed = (what: string, e: unknown): IpCheck => {
    if (!(e instanceof DnsError)) throw e;
    return { address, ehlo, problem: `${what} lookup got no answer (DNS ${e.failure}): try again`, unanswered: true };
  };
  let names: string[];
  try {
    names = await resolver.ptr(rev, { fresh: true });
  } catch (e) {
    if (e instanceof DnsError && e.absent) return { address, ehlo, problem: `no PTR record at ${rev}` };
    return failed(`PTR ${rev}`, e);
  }
  if (!names.includes(ehlo)) return { address, ehlo, problem: `PTR names ${names.join(', ')}, not ${ehlo}` };
  const type = isIP(address) === 4 ? 'A' : 'AAAA';
  let back: string[];
  try {
    back = await (type === 'A' ? resolver.a(ehlo, { fresh: true }) : resolver.aaaa(ehlo, { fresh: true }));
  } catch (e) {
    if (e instanceof DnsError && e.absent) return { address, ehlo, problem: `${ehlo} has no ${type} record` };
    return failed(`${type} ${ehlo}`, e);
  }
  if (!back.map(canonical).includes(canonical(address)))
    return { address, ehlo, problem: `${ehlo} resolves to ${back.join(', ')}, not back to ${address}` };
  return { address, ehlo, problem: null };
}

/** `svc doctor --ips`: one line per source address, OK or what is wrong; exit 1 if any is not OK. */
async function doctorIps(
  config: Readonly<Config>,
  out: (line: string) => void,
  err: (line: string) => void,
): Promise<number> {
  const s = config.sourceAddresses;
  const addresses = [...new Set([...(s.default ? [s.default] : []), ...Object.values(s.byDomain)])];
  if (!addresses.length) {
    err('svc doctor --ips: SVC_SOURCE_ADDRESSES is not set: deliveries leave from whatever address the system picks');
    return 2;
  }
  const resolver = createResolver({ servers: config.dnsServers, clock: systemClock });
  // Every address at once: the report takes one resolver timeout at worst, not one per address.
  const checks = await Promise.all(addresses.map((a) => checkIp(resolver, a, s.ehlo[a] ?? config.hostname)));
  const width = Math.max(...checks.map((c) => c.address.length));
  for (const c of checks) {
    const verdict = c.problem === null ? 'OK' : `${c.unanswered ? 'UNKNOWN' : 'WRONG'}: ${c.problem}`;
    out(`${c.address.padEnd(width)}  EHLO ${c.ehlo}  ${verdict}`);
  }
  return checks.every((c) => c.problem === null) ? 0 : 1;
}

/** The DMARC record suggested for the notify domain: platform mail always carries an aligned DKIM signature. */
export const platformDmarcValue = 'v=DMARC1; p=quarantine; adkim=r; aspf=r';

/** The DNS records platform mail needs (docs/operations.md, "Platform mail"), all required. */
export function platformRecords(config: Readonly<Config>, keys: readonly PlatformKey[]): Expected[] {
  const domain = notifyDomainOf(config.notifyFrom);
  const txt = (host: string, value: string): DnsRecord => ({ host, type: 'TXT', value });
  const need = 'required' as const;
  return [
    ...keys.map((k): Expected => ({
      label: k.algorithm === 'rsa' ? 'DKIM' : 'DKIM Ed25519',
      record: txt(k.host, k.txt),
      need,
      match: 'dkim',
    })),
    // The return path is on the notify domain (mail/platform-mail.ts), so SPF is checked there (RFC 7208 §2.4).
    { label: 'SPF', record: txt(domain, `v=spf1 include:${operatorSpfHost(config)} ~all`), need, match: 'spf' },
    { label: 'operator SPF', record: operatorSpfRecord(config), need, match: 'spf' },
    { label: 'DMARC', record: txt(`_dmarc.${domain}`, platformDmarcValue), need, match: 'dmarc' },
  ];
}

const VERDICT_WORD: Record<Verdict['kind'], string> = {
  ok: 'OK',
  missing: 'MISSING',
  wrong: 'WRONG',
  unanswered: 'UNKNOWN',
};

/** The platform DKIM keys in the database; null (said on `err`) when there is no database or no table yet. */
async function readPlatformKeys(
  config: Readonly<Config>,
  domain: string,
  err: (line: string) => void,
): Promise<PlatformKey[] | null> {
  if (!config.databaseUrl && !(await exists(path.join(config.dataDir, 'pg')))) {
    err(
      `svc doctor: no embedded database at ${path.join(config.dataDir, 'pg')} (set SVC_DATA_DIR, or SVC_DATABASE_URL)`,
    );
    return null;
  }
  const log = pino({ level: config.logLevel, base: { service: 'svc-mail' } }, pino.destination({ fd: 2, sync: true }));
  let db: Db | null = null;
  try {
    db = await openDb(config, log);
    return await platformKeys(db, domain);
  } catch (e) {
    if (!isPgError(e, PG_UNDEFINED_TABLE)) throw e;
    err('svc doctor: the database has no platform key table yet; run `svc migrate` first');
    return null;
  } finally {
    // Closed before any DNS work: the embedded database is held by one process at a time.
    await db?.close();
  }
}

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );

/** `svc doctor --platform`: every record platform mail needs, OK / MISSING / WRONG with the value to publish. */
async function doctorPlatform(
  config: Readonly<Config>,
  out: (line: string) => void,
  err: (line: string) => void,
): Promise<number> {
  const domain = notifyDomainOf(config.notifyFrom);
  const keys = await readPlatformKeys(config, domain, err);
  if (!keys) return 2;
  if (!keys.length) {
    err(
      `svc doctor --platform: no platform DKIM key for ${domain} yet: the MTA makes it at its first start ` +
        '(svc start); run this again then',
    );
    return 2;
  }
  const resolver = createResolver({ servers: config.dnsServers, clock: systemClock });
  const lookup = lookups(resolver);
  const records = platformRecords(config, keys);
  // The addresses platform mail leaves from: SVC_HOSTNAME's, and the source address its domain is given, if any.
  const hostAddresses = async (type: 'A' | 'AAAA') => {
    try {
      return {
        addresses: await (type === 'A'
          ? resolver.a(config.hostname, { fresh: true })
          : resolver.aaaa(config.hostname, { fresh: true })),
      };
    } catch (e) {
      if (!(e instanceof DnsError)) throw e;
      return e.absent ? { addresses: [] } : { addresses: [], failure: e.failure };
    }
  };
  const [judged, v4, v6] = await Promise.all([
    Promise.all(
      records.map(async (e) => {
        try {
          return { e, verdict: judge(e, await lookup(e.record.host, e.record.type)) };
        } catch (x) {
          if (!(x instanceof DnsError)) throw x;
          return { e, verdict: { kind: 'unanswered', failure: x.failure } as Verdict };
        }
      }),
    ),
    hostAddresses('A'),
    hostAddresses('AAAA'),
  ]);
  const source = sourceAddressFor(config.sourceAddresses, config.notifyFrom);
  const sources = new Map<string, string>();
  for (const a of [...v4.addresses, ...v6.addresses]) sources.set(canonical(a), config.hostname);
  if (source) sources.set(canonical(source), config.sourceAddresses.ehlo[source] ?? config.hostname);
  const ips = await Promise.all([...sources].map(([a, ehlo]) => checkIp(resolver, a, ehlo)));

  out(`svc doctor --platform: platform mail from ${config.notifyName} <${config.notifyFrom}>, notify domain ${domain}`);
  let bad = 0;
  for (const { e, verdict } of judged) {
    if (verdict.kind !== 'ok') bad++;
    const foundValues = verdict.kind === 'wrong' ? verdict.found.map((f) => JSON.stringify(clip(f))).join(', ') : '';
    const found =
      verdict.kind === 'wrong'
        ? ` (found ${foundValues}${verdict.why ? `; ${verdict.why}` : ''})`
        : verdict.kind === 'unanswered'
          ? ` (DNS ${verdict.failure}: no answer, try again)`
          : '';
    out(
      `  ${VERDICT_WORD[verdict.kind].padEnd(8)}  ${e.label.padEnd(13)}  ${e.record.type} ${e.record.host}  ` +
        `${shown(e.record)}${found}`,
    );
  }
  if (!sources.size) {
    bad++;
    const why = v4.failure ?? v6.failure;
    out(
      `  ${(why ? 'UNKNOWN' : 'MISSING').padEnd(8)}  ${'address'.padEnd(13)}  A/AAAA ${config.hostname}  ` +
        `the public address(es) the MTA sends from${why ? ` (DNS ${why}: no answer, try again)` : ''}`,
    );
  }
  for (const c of ips) {
    if (c.problem !== null) bad++;
    const word =
      c.problem === null ? 'OK' : c.unanswered ? 'UNKNOWN' : c.problem.startsWith('no PTR') ? 'MISSING' : 'WRONG';
    out(
      `  ${word.padEnd(8)}  ${'PTR (FCrDNS)'.padEnd(13)}  PTR ${reverseName(c.address)}  ${c.ehlo}` +
        (c.problem === null ? ` (and back to ${c.address})` : ` (${c.problem})`),
    );
  }
  const total = judged.length + Math.max(ips.length, 1);
  out(
    `${total - bad} of ${total} records right` +
      (bad ? '. Publish the records marked MISSING or WRONG (the value shown), then run this again.' : '.'),
  );
  return bad ? 1 : 0;
}

/** Runs the check; returns the exit code. `out` receives the report, `err` usage and errors. */
export async function doctor(
  args: string[],
  config: Readonly<Config>,
  out: (line: string) => void = (l) => console.log(l),
  err: (line: string) => void = (l) => console.error(l),
): Promise<number> {
  let positionals: string[];
  let ips: boolean | undefined;
  let platform: boolean | undefined;
  try {
    ({
      positionals,
      values: { ips, platform },
    } = parseArgs({
      args,
      allowPositionals: true,
      options: { ips: { type: 'boolean' }, platform: { type: 'boolean' } },
    }));
  } catch (e) {
    err(`svc doctor: ${(e as Error).message}\n${DOCTOR_USAGE}`);
    return 2;
  }
  if (platform) {
    if (positionals.length || ips) {
      err(DOCTOR_USAGE);
      return 2;
    }
    return doctorPlatform(config, out, err);
  }
  if (ips) {
    if (positionals.length) {
      err(DOCTOR_USAGE);
      return 2;
    }
    return doctorIps(config, out, err);
  }
  if (positionals.length !== 1) {
    err(DOCTOR_USAGE);
    return 2;
  }
  const raw = positionals[0] as string;
  const domain = normalizeDomain(raw);
  if (!domain) {
    err(`svc doctor: ${JSON.stringify(raw)} is not a valid domain name`);
    return 2;
  }

  if (!config.databaseUrl) {
    const dir = path.join(config.dataDir, 'pg');
    if (
      !(await stat(dir).then(
        () => true,
        () => false,
      ))
    ) {
      err(`svc doctor: no embedded database at ${dir} (set SVC_DATA_DIR, or SVC_DATABASE_URL)`);
      return 2;
    }
  }
  // The log (the embedded-database warning) goes to stderr: stdout is the report.
  const log = pino({ level: config.logLevel, base: { service: 'svc-mail' } }, pino.destination({ fd: 2, sync: true }));
  const db = await openDb(config, log);
  let found: { claim: Claim; outbound: Outbound[]; inbound: Inbound[] } | null;
  try {
    const claim = await findClaimByDomain(db, domain);
    found = claim
      ? { claim, outbound: await listOutbound(db, [claim.id]), inbound: await listInbound(db, [claim.id]) }
      : null;
  } catch (e) {
    if (!isPgError(e, PG_UNDEFINED_TABLE)) throw e;
    err('svc doctor: the database has no domain tables yet; run `svc migrate` first');
    return 2;
  } finally {
    // Closed before any DNS work: the embedded database is held by one process at a time.
    await db.close();
  }
  if (!found) {
    err(`svc doctor: ${domain} is not claimed on this platform (claim it first; doctor checks the exact name claimed)`);
    return 2;
  }

  const { claim, outbound, inbound } = found;
  const sections = expectedRecords(config, claim, outbound, inbound);
  const lookup = lookups(createResolver({ servers: config.dnsServers, clock: systemClock }));
  // Every lookup at once: the whole report takes one resolver timeout at worst, not one per record.
  const judged = await Promise.all(
    sections.map(async (s) => ({
      section: s.section,
      rows: await Promise.all(
        s.records.map(async (e) => {
          let verdict: Verdict;
          try {
            verdict = judge(e, await lookup(e.record.host, e.record.type));
          } catch (x) {
            if (!(x instanceof DnsError)) throw x;
            verdict = { kind: 'unanswered', failure: x.failure };
          }
          return { e, verdict };
        }),
      ),
    })),
  );

  out(`svc doctor ${domain}: claim ${claim.status}, project ${claim.projectId}`);
  let required = 0;
  let requiredOk = 0;
  let advice = 0;
  for (const s of judged) {
    out(s.section);
    for (const { e, verdict } of s.rows) {
      if (e.need === 'required') {
        required++;
        if (verdict.kind === 'ok') requiredOk++;
      } else if (e.need === 'recommended' && verdict.kind !== 'ok') advice++;
      const status = statusText(verdict, e.need);
      out(`  ${status.padEnd(21)}  ${e.label.padEnd(15)}  ${e.record.type} ${e.record.host}  ${shown(e.record)}`);
    }
  }
  out(
    `${requiredOk} of ${required} required records right` +
      (advice ? `; ${advice} recommended record${advice === 1 ? '' : 's'} missing or different` : '') +
      (requiredOk < required ? '. Publish the records marked missing or wrong, then verify in the console.' : '.'),
  );
  return requiredOk === required ? 0 : 1;
}
