// `svc queue`: the operator's view of the outbound spool. Lists, inspects, makes due now ("retry") and
// cancels ("delete") queued messages; `summary` counts them per domain (Postfix's qshape); `hold` and
// `release` stop and resume a destination domain; `bounce` ends messages failed (Postfix's `postsuper -d`);
// `lost` lists, from Postgres, the messages the reconciler ended as lost.
//
// It opens ONLY the LMDB environment under SVC_DATA_DIR, never Postgres: the running service may hold
// the embedded database (PGlite), which one process at a time can open, while LMDB is made to be shared
// by processes. So it works the same whether the service is running on that data directory or not.
// That is also why `delete` and `bounce` do not remove anything: they mark the entry cancelled (with their
// reason) and make it due, and the delivery worker, which owns the message's Postgres row, records it
// `failed` ("cancelled by operator", "bounced by operator"), which notifies the webhooks, and removes it.
// Likewise a hold is a record in the spool's environment that the worker's lease reads (storage/lmdb/spool.ts).
//
// Exit codes, as for every `svc` command (bin/svc.ts): 0 done; 1 failed (an id that is not spooled, or
// no spool under SVC_DATA_DIR); 2 bad usage or a bad configuration.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Config } from '../config/schema.js';
import { normalizeDomain } from '../mail/domain-names.js';
import { sourceAddressFor } from '../mta/outbound/source-address.js';
import { openLmdb } from '../storage/lmdb/env.js';
import {
  domainKey,
  openSpool,
  type Spool,
  type SpoolEntry,
  type SpoolSummary,
  type SpoolSummaryRow,
} from '../storage/lmdb/spool.js';
import { openPostgres } from '../storage/pg/client.js';
import { lostMessages } from '../storage/pg/deliveries.js';

export const QUEUE_USAGE = `usage: svc queue <subcommand>
  list [--limit N] [--domain D] [--json]   queued messages in schedule order (first 100 by default)
  inspect <id> [--json | --body]           one message's fields and headers; --body: its raw bytes only
  retry <id> | --all [--domain D]          make messages due now
  delete <id>                              cancel a message (the MTA records it failed and drops it)
  summary [--limit N] [--json]             messages, deferred, held and oldest per destination domain and
                                           per sender domain (like Postfix's qshape)
  hold [--domain D]                        hold a destination domain: its mail stays queued, not attempted;
                                           without --domain: list the held domains
  release --domain D                       end a hold: the domain's messages are due now
  bounce <id> | --domain D                 end messages failed ("bounced by operator"), webhooks notified
  lost [--days N] [--json]                 messages the reconciler ended failed as lost (last 30 days;
                                           reads Postgres: needs SVC_DATABASE_URL)`;

const SUBCOMMANDS = ['list', 'inspect', 'retry', 'delete', 'lost', 'summary', 'hold', 'release', 'bounce'];
const BOUNCE_REASON = 'bounced by operator';
const DEFAULT_LIMIT = 100;
/** `retry --all` reschedules in slices of this many, each one group commit, never one promise per entry at once. */
const RETRY_SLICE = 1_000;
/** A header block longer than this is cut: a message without a blank line would otherwise print whole. */
const MAX_HEADER_BYTES = 64 * 1024;

export interface QueueIo {
  /** One line of the report on stdout. */
  out(line: string): void;
  /** One line of error on stderr. */
  err(line: string): void;
  /** Raw bytes to stdout (`inspect --body`). */
  raw(bytes: Uint8Array): void;
}

const processIo: QueueIo = {
  out: (l) => console.log(l),
  err: (l) => console.error(l),
  raw: (b) => void process.stdout.write(b),
};

class UsageError extends Error {}

/** Whatever an API caller put in an address never reaches the operator's terminal as control characters. */
function clean(s: string): string {
  return s.replace(
    /[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g,
    (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`,
  );
}

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s);

function iso(ms: number): string {
  const d = new Date(ms);
  return Number.isNaN(d.getTime()) ? String(ms) : d.toISOString();
}

/** 42s, 5m, 3h12m, 2d4h. */
function span(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}h${m % 60 ? `${m % 60}m` : ''}`;
  const d = Math.floor(h / 24);
  return `${d}d${h % 24 ? `${h % 24}h` : ''}`;
}

/** When the next attempt is: due, or in how long. */
const when = (e: SpoolEntry, now: number) => (e.nextAttemptMs <= now ? 'due' : `in ${span(e.nextAttemptMs - now)}`);

const state = (e: SpoolEntry, now: number, held: (d: string) => boolean) =>
  e.cancelledMs !== undefined ? 'cancelled' : held(e.domain) ? 'held' : when(e, now);

/** The JSON form of an entry: its stored fields, plus the times written out. */
function entryJson(e: SpoolEntry, now: number): Record<string, unknown> {
  // crlfOnly is a hint between the sender and the signer, not the operator's.
  const { crlfOnly: _, ...shown } = e;
  return {
    ...shown,
    nextAttempt: iso(e.nextAttemptMs),
    created: iso(e.createdMs),
    ageMs: Math.max(0, now - e.createdMs),
    ...(e.cancelledMs !== undefined ? { cancelled: iso(e.cancelledMs) } : {}),
  };
}

/**
 * A --domain matcher. Destination domains are spooled as the recipient address has them, so the
 * comparison ignores case, a trailing dot and IDN spelling (Unicode or punycode).
 */
function domainMatcher(raw: string | undefined): ((domain: string) => boolean) | null {
  if (raw === undefined) return null;
  const lower = raw.trim().toLowerCase().replace(/\.$/, '');
  if (!lower) throw new UsageError('--domain needs a domain name');
  const wanted = new Set([lower, normalizeDomain(raw) ?? lower]);
  const seen = new Map<string, boolean>();
  return (domain) => {
    let hit = seen.get(domain);
    if (hit === undefined) {
      const d = domain.toLowerCase().replace(/\.$/, '');
      hit = wanted.has(d) || wanted.has(normalizeDomain(domain) ?? d);
      seen.set(domain, hit);
    }
    return hit;
  };
}

function parseLimit(raw: string | undefined): number {
  if (raw === undefined) return DEFAULT_LIMIT;
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(Number(raw)))
    throw new UsageError(`--limit must be a whole number (got ${JSON.stringify(raw)})`);
  return Number(raw);
}

function table(rows: string[][]): string[] {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length))) ?? [];
  return rows.map((r) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join('  ')
      .trimEnd(),
  );
}

/** A parsed command line: every usage error is found before the spool is opened. */
type Plan =
  | { sub: 'list'; limit: number; domain: string | undefined; matches: ((d: string) => boolean) | null; json: boolean }
  | { sub: 'inspect'; id: string; body: boolean; json: boolean }
  | { sub: 'retry'; id: string }
  | { sub: 'retryAll'; domain: string | undefined; matches: ((d: string) => boolean) | null }
  | { sub: 'delete'; id: string }
  | { sub: 'summary'; limit: number; json: boolean }
  | { sub: 'hold'; domain: string | undefined }
  | { sub: 'release'; domain: string }
  | { sub: 'bounce'; id: string }
  | { sub: 'bounceDomain'; domain: string; matches: (d: string) => boolean }
  | { sub: 'lost'; days: number; json: boolean };

function oneId(positionals: string[], sub: string): string {
  if (positionals.length !== 1 || !positionals[0]) throw new UsageError(`${sub} takes exactly one message id`);
  return positionals[0];
}

function parse(sub: string, args: string[]): Plan {
  switch (sub) {
    case 'list': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { limit: { type: 'string' }, domain: { type: 'string' }, json: { type: 'boolean', default: false } },
      });
      if (positionals.length)
        throw new UsageError(`list takes no argument (got ${JSON.stringify(clean(positionals[0] ?? ''))})`);
      return {
        sub,
        limit: parseLimit(values.limit),
        domain: values.domain,
        matches: domainMatcher(values.domain),
        json: values.json,
      };
    }
    case 'inspect': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { body: { type: 'boolean', default: false }, json: { type: 'boolean', default: false } },
      });
      if (values.body && values.json) throw new UsageError('inspect takes --body or --json, not both');
      return { sub, id: oneId(positionals, sub), body: values.body, json: values.json };
    }
    case 'retry': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { all: { type: 'boolean', default: false }, domain: { type: 'string' } },
      });
      if (values.all) {
        if (positionals.length) throw new UsageError('retry takes a message id or --all, not both');
        return { sub: 'retryAll', domain: values.domain, matches: domainMatcher(values.domain) };
      }
      if (values.domain !== undefined) throw new UsageError('--domain goes with retry --all');
      return { sub, id: oneId(positionals, 'retry (or --all)') };
    }
    case 'delete': {
      const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
      return { sub, id: oneId(positionals, sub) };
    }
    case 'summary': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { limit: { type: 'string' }, json: { type: 'boolean', default: false } },
      });
      if (positionals.length) throw new UsageError('summary takes no argument');
      return { sub, limit: parseLimit(values.limit), json: values.json };
    }
    case 'hold':
    case 'release': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { domain: { type: 'string' } },
      });
      if (positionals.length) throw new UsageError(`${sub} takes --domain D, not an argument`);
      if (values.domain !== undefined) domainMatcher(values.domain); // refuses an empty name
      if (sub === 'hold') return { sub, domain: values.domain };
      if (values.domain === undefined) throw new UsageError('release needs --domain D');
      return { sub, domain: values.domain };
    }
    case 'bounce': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { domain: { type: 'string' } },
      });
      if (values.domain !== undefined) {
        if (positionals.length) throw new UsageError('bounce takes a message id or --domain, not both');
        return { sub: 'bounceDomain', domain: values.domain, matches: domainMatcher(values.domain)! };
      }
      return { sub, id: oneId(positionals, 'bounce (or --domain)') };
    }
    case 'lost': {
      const { values, positionals } = parseArgs({
        args,
        allowPositionals: true,
        options: { days: { type: 'string' }, json: { type: 'boolean', default: false } },
      });
      if (positionals.length) throw new UsageError('lost takes no argument');
      const days = values.days === undefined ? 30 : Number(values.days);
      if (!Number.isInteger(days) || days < 1 || days > 3650)
        throw new UsageError(
          `--days must be a whole number from 1 to 3650 (got ${JSON.stringify(clean(values.days ?? ''))})`,
        );
      return { sub, days, json: values.json };
    }
    default:
      throw new UsageError(`unknown subcommand ${JSON.stringify(clean(sub))} (${SUBCOMMANDS.join(', ')})`);
  }
}

/**
 * The messages the reconciler (mta/outbound/worker.ts) ended `failed` as lost: no longer in any spool, so they
 * are read from Postgres. The embedded database belongs to the running service alone, hence SVC_DATABASE_URL.
 */
async function lost(config: Config, plan: Extract<Plan, { sub: 'lost' }>, io: QueueIo): Promise<number> {
  if (!config.databaseUrl) {
    io.err(
      "svc queue lost: needs SVC_DATABASE_URL (the embedded database is the running service's alone; " +
        "its log names each one: 'lost message ended failed')",
    );
    return 1;
  }
  const db = openPostgres(config.databaseUrl, 1);
  try {
    const rows = await lostMessages(db, new Date(Date.now() - plan.days * 86_400_000), 1000);
    if (plan.json) for (const r of rows) io.out(JSON.stringify(r));
    else if (!rows.length) io.out(`no message ended as lost in the last ${plan.days} days`);
    else
      for (const line of table([
        ['ID', 'ENDED', 'DOMAIN', 'PROJECT'],
        ...rows.map((r) => [r.id, r.endedAt.toISOString(), clean(r.domain), r.projectId]),
      ]))
        io.out(line);
    return 0;
  } finally {
    await db.close();
  }
}

/** Whether a spooled domain is held now (one read of the held set). */
function heldTest(spool: Spool): (domain: string) => boolean {
  const held = new Set(spool.heldDomains().map((h) => h.domain));
  return held.size ? (d) => held.has(domainKey(d)) : () => false;
}

function list(spool: Spool, plan: Extract<Plan, { sub: 'list' }>, io: QueueIo): number {
  const { limit, matches } = plan;
  const now = Date.now();
  const held = heldTest(spool);
  let shown: SpoolEntry[];
  let matching: number;
  const total = spool.count();
  if (matches) {
    // One pass over the queue: the first `limit` matches are shown, every match is counted.
    shown = [];
    matching = 0;
    for (const e of spool.entries()) {
      if (!matches(e.domain)) continue;
      matching++;
      if (shown.length < limit) shown.push(e);
    }
  } else {
    shown = spool.list(limit);
    matching = total;
  }

  if (plan.json) {
    for (const e of shown) io.out(JSON.stringify(entryJson(e, now)));
    io.out(JSON.stringify({ total, matching, shown: shown.length }));
    return 0;
  }
  if (shown.length) {
    const rows = [['ID', 'DOMAIN', 'RCPT', 'ATTEMPTS', 'NEXT ATTEMPT', 'AGE', 'STATE']];
    for (const e of shown) {
      rows.push([
        clean(e.id),
        clip(clean(e.domain), 40),
        clip(clean(e.rcptTo), 48),
        String(e.attempts),
        iso(e.nextAttemptMs),
        span(now - e.createdMs),
        state(e, now, held),
      ]);
    }
    for (const line of table(rows)) io.out(line);
  }
  io.out(
    `${shown.length} shown of ${matching} queued` +
      (matches ? ` for ${clean(plan.domain ?? '')} (${total} in the queue)` : ''),
  );
  return 0;
}

/** The header block of a raw message: everything before the first empty line. */
function headerLines(body: Buffer): string[] {
  let end = body.indexOf('\r\n\r\n');
  const lf = body.indexOf('\n\n');
  if (end < 0 || (lf >= 0 && lf < end)) end = lf;
  if (end < 0) end = body.length;
  const cut = end > MAX_HEADER_BYTES;
  const lines = body
    .subarray(0, Math.min(end, MAX_HEADER_BYTES))
    .toString('utf8')
    .split(/\r?\n/)
    .map((l) => clean(l.replace(/\t/g, ' ')));
  if (cut) lines.push(`… (header block cut at ${MAX_HEADER_BYTES} bytes)`);
  return lines;
}

const notSpooled = (id: string) =>
  `svc queue: no queued message ${JSON.stringify(clean(id))} (delivered, failed, or never spooled here)`;

function inspect(spool: Spool, plan: Extract<Plan, { sub: 'inspect' }>, io: QueueIo): number {
  const { id } = plan;
  const e = spool.get(id);
  if (!e) {
    io.err(notSpooled(id));
    return 1;
  }
  const body = spool.body(id);
  if (plan.body) {
    if (!body) {
      io.err(`svc queue: message ${JSON.stringify(clean(id))} is spooled without a body`);
      return 1;
    }
    io.raw(body);
    return 0;
  }
  const now = Date.now();
  if (plan.json) {
    io.out(JSON.stringify({ ...entryJson(e, now), sizeBytes: body ? body.length : null }));
    return 0;
  }
  const fields: [string, string][] = [
    ['id', e.id],
    ['projectId', e.projectId],
    ['domain', e.domain],
    ['mailFrom', e.mailFrom],
    ['rcptTo', e.rcptTo],
    ['outboundId', e.outboundId],
    ['attempts', String(e.attempts)],
    ['nextAttempt', `${iso(e.nextAttemptMs)} (${when(e, now)})`],
    ['created', `${iso(e.createdMs)} (age ${span(now - e.createdMs)})`],
  ];
  if (e.cancelledMs !== undefined)
    fields.push([
      'cancelled',
      `${iso(e.cancelledMs)} (the MTA records it failed and removes it when it next leases it)`,
    ]);
  fields.push(['size', body ? `${body.length} bytes` : '(no body stored)']);
  for (const [k, v] of fields) io.out(`${`${k}:`.padEnd(13)}${clean(v)}`);
  if (body) {
    io.out('');
    for (const line of headerLines(body)) io.out(line);
  }
  return 0;
}

async function retryAll(spool: Spool, plan: Extract<Plan, { sub: 'retryAll' }>, io: QueueIo): Promise<number> {
  const { matches } = plan;
  // Ids first, writes after: no read snapshot is held across the writes.
  const ids: string[] = [];
  for (const e of spool.entries()) if (!matches || matches(e.domain)) ids.push(e.id);
  const now = Date.now();
  for (let i = 0; i < ids.length; i += RETRY_SLICE) {
    await Promise.all(ids.slice(i, i + RETRY_SLICE).map((id) => spool.reschedule(id, now)));
  }
  io.out(
    `${ids.length} message${ids.length === 1 ? '' : 's'}` +
      `${matches ? ` for ${clean(plan.domain ?? '')}` : ''} due now (${iso(now)})`,
  );
  return 0;
}

async function retry(spool: Spool, { id }: Extract<Plan, { sub: 'retry' }>, io: QueueIo): Promise<number> {
  const before = spool.get(id);
  if (!before) {
    io.err(notSpooled(id));
    return 1;
  }
  const now = Date.now();
  await spool.reschedule(id, now);
  // reschedule leaves alone an id that was delivered (removed) between the read above and the write.
  const after = spool.get(id);
  if (!after) {
    io.err(notSpooled(id));
    return 1;
  }
  io.out(
    `${clean(id)}: due now (${iso(now)}; was ${iso(before.nextAttemptMs)})` +
      `${after.cancelledMs !== undefined ? '; still cancelled' : ''}`,
  );
  return 0;
}

/** `delete` (no reason: the worker says "cancelled by operator") and `bounce <id>` ("bounced by operator"). */
async function cancel(spool: Spool, id: string, reason: string | undefined, io: QueueIo): Promise<number> {
  const before = spool.get(id);
  if (!(await spool.cancel(id, Date.now(), reason))) {
    io.err(notSpooled(id));
    return 1;
  }
  const at = spool.get(id)?.cancelledMs;
  const verb = reason === undefined ? 'cancelled' : 'bounced';
  io.out(
    before?.cancelledMs !== undefined
      ? `${clean(id)}: already cancelled at ${iso(before.cancelledMs)}`
      : `${clean(id)}: ${verb}${at !== undefined ? ` at ${iso(at)}` : ''}; ` +
          `the MTA records it failed ("${reason ?? 'cancelled by operator'}") and removes it when it next leases it`,
  );
  return 0;
}

/**
 * `bounce --domain D`: every message whose recipients still to deliver are all in D. A message also to other
 * domains is left queued and named, to be bounced by id: bouncing it would fail recipients the operator did
 * not name (the spool cancels whole messages).
 */
async function bounceDomain(spool: Spool, plan: Extract<Plan, { sub: 'bounceDomain' }>, io: QueueIo): Promise<number> {
  const { matches } = plan;
  // Ids first, writes after: no read snapshot is held across the writes.
  const ids: string[] = [];
  const mixed: { id: string; others: string[] }[] = [];
  for (const e of spool.entries()) {
    const domains = e.envelopes ? e.envelopes.map((v) => v.domain) : [e.domain];
    if (!domains.some(matches)) continue;
    const others = domains.filter((d) => !matches(d));
    if (others.length) mixed.push({ id: e.id, others });
    else ids.push(e.id);
  }
  const now = Date.now();
  let n = 0;
  for (let i = 0; i < ids.length; i += RETRY_SLICE) {
    const done = await Promise.all(ids.slice(i, i + RETRY_SLICE).map((id) => spool.cancel(id, now, BOUNCE_REASON)));
    n += done.filter(Boolean).length;
  }
  for (const m of mixed)
    io.out(`${clean(m.id)}: left queued, also to ${clean(m.others.join(', '))} (bounce it by id to end it all)`);
  io.out(
    `${n} message${n === 1 ? '' : 's'} for ${clean(plan.domain)} bounced; the MTA records each failed ` +
      `("${BOUNCE_REASON}") and removes it when it next leases it` +
      (mixed.length ? `; ${mixed.length} also to other domains left queued` : ''),
  );
  return 0;
}

async function hold(spool: Spool, plan: Extract<Plan, { sub: 'hold' }>, io: QueueIo): Promise<number> {
  if (plan.domain === undefined) {
    const held = spool.heldDomains();
    if (!held.length) io.out('no domain held');
    else
      for (const line of table([['DOMAIN', 'HELD SINCE'], ...held.map((h) => [clean(h.domain), iso(h.sinceMs)])]))
        io.out(line);
    return 0;
  }
  const key = domainKey(plan.domain);
  const now = Date.now();
  if (!(await spool.hold(plan.domain, now))) {
    const since = spool.heldDomains().find((h) => h.domain === key)?.sinceMs;
    io.out(`${clean(key)}: already held${since !== undefined ? ` since ${iso(since)}` : ''}`);
    return 0;
  }
  io.out(
    `${clean(key)}: held at ${iso(now)}; its messages stay queued and are not attempted until ` +
      `svc queue release --domain ${clean(key)} (a delivery already under way finishes)`,
  );
  return 0;
}

async function release(spool: Spool, plan: Extract<Plan, { sub: 'release' }>, io: QueueIo): Promise<number> {
  const key = domainKey(plan.domain);
  const now = Date.now();
  const { wasHeld, released } = await spool.release(plan.domain, now);
  if (!wasHeld) {
    io.err(`svc queue: ${JSON.stringify(clean(key))} is not held (svc queue hold lists the held domains)`);
    return 1;
  }
  io.out(`${clean(key)}: released; ${released} message${released === 1 ? '' : 's'} due now (${iso(now)})`);
  return 0;
}

const summaryRowJson = (r: SpoolSummaryRow, now: number) => ({
  messages: r.messages,
  deferred: r.deferred,
  held: r.held,
  oldest: iso(r.oldestCreatedMs),
  oldestAgeMs: Math.max(0, now - r.oldestCreatedMs),
});

/**
 * The sender-domain rows regrouped by the local address their deliveries leave from (SVC_SOURCE_ADDRESSES, by
 * sending domain), or null when none is configured (every delivery leaves from the system's choice).
 */
function bySource(config: Readonly<Config>, rows: SpoolSummaryRow[]): SpoolSummaryRow[] | null {
  const sa = config.sourceAddresses;
  if (sa.default === null && !Object.keys(sa.byDomain).length) return null;
  const out = new Map<string, SpoolSummaryRow>();
  for (const r of rows) {
    const key = sourceAddressFor(sa, `x@${r.key}`) ?? '(system)';
    const o = out.get(key);
    if (!o) out.set(key, { ...r, key });
    else {
      o.messages += r.messages;
      o.deferred += r.deferred;
      o.held += r.held;
      o.oldestCreatedMs = Math.min(o.oldestCreatedMs, r.oldestCreatedMs);
    }
  }
  return [...out.values()].sort((a, b) => b.messages - a.messages);
}

function summary(spool: Spool, config: Readonly<Config>, plan: Extract<Plan, { sub: 'summary' }>, io: QueueIo): number {
  const s: SpoolSummary = spool.summary();
  const sources = bySource(config, s.bySender);
  const heldDomains = spool.heldDomains();
  const now = Date.now();
  const { limit } = plan;
  if (plan.json) {
    io.out(
      JSON.stringify({
        total: s.total,
        deferred: s.deferred,
        held: s.held,
        cancelled: s.cancelled,
        oldest: s.oldestCreatedMs === null ? null : iso(s.oldestCreatedMs),
        oldestAgeMs: s.oldestCreatedMs === null ? null : Math.max(0, now - s.oldestCreatedMs),
        domains: s.byDomain.length,
        senders: s.bySender.length,
        byDomain: s.byDomain.slice(0, limit).map((r) => ({ domain: r.key, ...summaryRowJson(r, now) })),
        bySender: s.bySender.slice(0, limit).map((r) => ({ senderDomain: r.key, ...summaryRowJson(r, now) })),
        ...(sources
          ? { bySource: sources.slice(0, limit).map((r) => ({ sourceAddress: r.key, ...summaryRowJson(r, now) })) }
          : {}),
        heldDomains: heldDomains.map((h) => ({ domain: h.domain, since: iso(h.sinceMs) })),
      }),
    );
    return 0;
  }
  const block = (title: string, rows: SpoolSummaryRow[]) => {
    const cells = [[title, 'MESSAGES', 'DEFERRED', 'HELD', 'OLDEST']];
    for (const r of rows.slice(0, limit))
      cells.push([
        clip(clean(r.key), 60),
        String(r.messages),
        String(r.deferred),
        String(r.held),
        span(now - r.oldestCreatedMs),
      ]);
    for (const line of table(cells)) io.out(line);
    if (rows.length > limit) io.out(`… ${rows.length - limit} more (--limit N)`);
  };
  if (s.total) {
    block('DOMAIN', s.byDomain);
    io.out('');
    block('SENDER DOMAIN', s.bySender);
    io.out('');
    if (sources) {
      block('SOURCE ADDRESS', sources);
      io.out('');
    }
  }
  io.out(
    `${s.total} queued, ${s.deferred} deferred, ${s.held} held, ${s.cancelled} cancelled` +
      (s.oldestCreatedMs === null ? '' : `; oldest ${span(now - s.oldestCreatedMs)}`) +
      (heldDomains.length ? `; held domains: ${heldDomains.map((h) => clean(h.domain)).join(', ')}` : ''),
  );
  return 0;
}

/** Runs `svc queue <args>`; returns the exit code. */
export async function queue(args: string[], config: Readonly<Config>, io: QueueIo = processIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === 'help' || sub === '--help') {
    io.out(QUEUE_USAGE);
    return 0;
  }
  if (sub === undefined) {
    io.err(`svc queue: which subcommand? ${SUBCOMMANDS.join(', ')} (svc queue help)`);
    return 2;
  }
  let plan: Plan;
  try {
    plan = parse(sub, rest);
  } catch (e) {
    // parseArgs throws a TypeError with an ERR_PARSE_ARGS_* code for an unknown option or a missing value.
    if (
      e instanceof UsageError ||
      (e instanceof TypeError && String((e as { code?: unknown }).code).startsWith('ERR_PARSE_ARGS'))
    ) {
      // parseArgs writes some of its messages over several lines: one line on stderr, always.
      io.err(`svc queue${SUBCOMMANDS.includes(sub) ? ` ${sub}` : ''}: ${e.message.replace(/\s*\n\s*/g, ' ')}`);
      return 2;
    }
    throw e;
  }
  if (plan.sub === 'lost') return lost(config, plan, io);
  // openLmdb creates the directory: check first, so a mistyped SVC_DATA_DIR is an error, not an empty queue.
  const dir = path.join(config.dataDir, 'lmdb');
  if (
    !(await stat(dir).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  ) {
    io.err(`svc queue: no spool at ${dir} (set SVC_DATA_DIR to the service's data directory)`);
    return 1;
  }
  const env = await openLmdb(config.dataDir);
  try {
    const spool = openSpool(env);
    switch (plan.sub) {
      case 'list':
        return list(spool, plan, io);
      case 'inspect':
        return inspect(spool, plan, io);
      case 'retry':
        return await retry(spool, plan, io);
      case 'retryAll':
        return await retryAll(spool, plan, io);
      case 'delete':
        return await cancel(spool, plan.id, undefined, io);
      case 'bounce':
        return await cancel(spool, plan.id, BOUNCE_REASON, io);
      case 'bounceDomain':
        return await bounceDomain(spool, plan, io);
      case 'summary':
        return summary(spool, config, plan, io);
      case 'hold':
        return await hold(spool, plan, io);
      case 'release':
        return await release(spool, plan, io);
    }
  } finally {
    await env.close();
  }
}
