// `npm run bench:imap`: the service's IMAP server beside Debian's Dovecot (dovecot-imapd), in one run on
// one machine (issue 13). Both serve the same --messages generated messages (default 10,000; 1–50 KB,
// plain, multipart/alternative and some with attachments; a known word in some subjects and a known
// needle in some bodies):
//
//   a. the service (`svc start --role all`, a Postgres database of its own, the local blob store on
//      LMDB), the messages imported through the API (docs/api.md §4.5, 200 per call) into an inbox,
//      logged in with the inbox's initial password;
//   b. a private Dovecot (bench/dovecot.ts) over a Maildir holding the same messages as files in cur/.
//
// A raw-socket IMAP client of the bench's own (send a command, read until its tagged completion, skip
// literals by their length, count bytes: the same few lines of work on either side) logs in, selects
// INBOX and times, --reps times each, per run:
//   FETCH 1:* (BODY.PEEK[HEADER])   FETCH 1:* (BODY.PEEK[])   SEARCH HEADER Subject <word>   SEARCH BODY <needle>
// and both sides must return the same numbers (the bench fails otherwise). Then memory: 1,000 idle
// connections, each logged in with INBOX selected, spread over loopback source addresses (127.0.1.x, ten
// each: our limit is 20 per address, Dovecot's mail_max_userip_connections 10 per user and address);
// the growth of the service process's RSS against the growth of the summed RSS (and PSS) of every
// Dovecot process, in Dovecot's default process model (one imap process per connection).
//
// Both sides get one untimed pass of every operation first (Dovecot builds its index and cache at first
// access; V8 compiles our hot paths). The sides take turns, the first alternating from run to run.
// Ratios are Dovecot's time over ours (and Dovecot's memory over ours): ≥ 1.0 means at least as good.
// Needs root (Dovecot), Debian's dovecot-imapd, and a PostgreSQL server (--pg) where it creates a
// database of its own and drops it at the end. Writes bench/results/imap-latest.json.
//
//   node --import ./bin/resolve-sources.ts bench/imap.ts [--messages 10000] [--runs 3] [--reps 3] [--connections 1000]
//                                   [--pg URL] [--cpu-prof]
import { accessSync, constants } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createClient, type Client } from '@svc-mail/sdk';
import { openPostgres } from '../storage/pg/client.js';
import { markInboundVerified } from '../storage/pg/domains.js';
import { memoryOfAll, startDovecot, writeMaildir, type MaildirMessage } from './dovecot.js';
import { ADMIN_KEY, startChild } from './service.js';
import { benchDatabase, fixed, freePort, medianRange, PG_URL, sleep, span, svcChildren } from './util.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));

const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '3' },
    reps: { type: 'string', default: '3' },
    connections: { type: 'string', default: '1000' },
    pg: { type: 'string', default: PG_URL },
    'cpu-prof': { type: 'boolean', default: false },
  },
});
const MESSAGES = Number(args.messages);
const RUNS = Math.max(1, Number(args.runs));
const REPS = Math.max(1, Number(args.reps));
const CONNECTIONS = Number(args.connections);
const DOMAIN = 'imap-bench.test';
const LOCALPART = 'inbox';
/** In the Subject of every tenth message (and nowhere else). */
const SUBJECT_WORD = 'Quarterly';
/** In the text of every 25th message's body (and nowhere else). */
const NEEDLE = 'zanzibar';
/** Connections per loopback source address: within Dovecot's default 10 per user and address. */
const PER_ADDRESS = 10;

for (const tool of ['/usr/sbin/dovecot', '/usr/bin/doveadm']) accessSync(tool, constants.X_OK);

const failures: string[] = [];
const cleanups: (() => Promise<unknown>)[] = [];
const cleanup = async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch((err) => console.error(`cleanup: ${err}`));
};
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => void cleanup().finally(() => process.exit(130)));

// ---- the messages -----------------------------------------------------------------------------------

/** mulberry32: a small deterministic PRNG, so every run and both sides get the same corpus. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  'the of and to in is you that it he was for on are as with his they at be this have from or one had by ' +
  'word but not what all were we when your can said there use an each which she do how their if will up ' +
  'other about out many then them these so some her would make like him into time has look two more write ' +
  'go see number no way could people my than first water been call who oil its now find long down day did ' +
  'get come made may part order invoice shipment account payment delivery update meeting project team ' +
  'report customer review schedule budget contract support service release version server network ' +
  'thanks regards please attached following question answer request status pending confirmed tracking'
).split(' ');
const NAMES = ['Alice Martin', 'Bob Chen', 'Carla Díaz', 'David Okafor', 'Eva Novak', 'Frank Müller', 'Grace Ito'];
const SUBJECTS = ['Invoice', 'Meeting notes', 'Re: Project update', 'Your order', 'Weekly digest', 'Fwd: Budget'];

/** The messages, CRLF line ends; message i is UID i + 1 on both sides. */
function corpus(n: number): { messages: MaildirMessage[]; subjectHits: number; bodyHits: number } {
  const rnd = prng(13);
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(rnd() * xs.length)]!;
  const text = (bytes: number, needle: boolean): string => {
    const lines: string[] = [];
    let size = 0;
    let line = '';
    while (size < bytes) {
      const w = pick(WORDS);
      if (line.length + w.length + 1 > 72) {
        lines.push(line);
        size += line.length + 2;
        line = '';
        if (rnd() < 0.12) (lines.push(''), (size += 2));
      }
      line = line ? `${line} ${w}` : w;
    }
    if (line) lines.push(line);
    if (needle) lines.splice(Math.floor(lines.length / 2), 0, `The parcel ships to Zanzibar on Monday.`);
    return lines.join('\r\n');
  };
  const base = Date.UTC(2024, 0, 1);
  const messages: MaildirMessage[] = [];
  let subjectHits = 0;
  let bodyHits = 0;
  for (let i = 0; i < n; i++) {
    const date = new Date(base + i * 97_000);
    // 1–50 KB, most of them small: the size of a body, the headers come on top.
    const target = Math.round(1024 + rnd() * rnd() * 49 * 1024);
    const kind = i % 20 < 11 ? 'plain' : i % 20 < 17 ? 'alternative' : 'attachment';
    const inSubject = i % 10 === 3;
    const inBody = i % 25 === 7;
    if (inSubject) subjectHits++;
    if (inBody) bodyHits++;
    const from = pick(NAMES);
    const to = pick(NAMES);
    const addr = (name: string) => `${name.split(' ')[0]!.toLowerCase()}@example-${i % 17}.test`;
    const subject = inSubject ? `${SUBJECT_WORD} report ${i}` : `${pick(SUBJECTS)} ${i}`;
    const relay = `mail-${i % 31}.example-${i % 17}.test`;
    const header = [
      `Return-Path: <${addr(from)}>`,
      `Received: from ${relay} (${relay} [192.0.2.${i % 250}])`,
      `\tby mx.imap-bench.test with ESMTPS id ${(i * 2654435761).toString(36)}`,
      `\tfor <${LOCALPART}@${DOMAIN}>; ${date.toUTCString().replace('GMT', '+0000')}`,
      `DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example-${i % 17}.test; s=s1;`,
      `\th=from:to:subject:date:message-id; bh=${Buffer.from(`bh${i}`).toString('base64')}=;`,
      `\tb=${Buffer.from(`signature of message ${i} `.repeat(6)).toString('base64').slice(0, 170)}`,
      `From: ${from} <${addr(from)}>`,
      `To: ${to} <${LOCALPART}@${DOMAIN}>`,
      `Subject: ${subject}`,
      `Date: ${date.toUTCString().replace('GMT', '+0000')}`,
      `Message-ID: <${i}.${(i * 40503).toString(36)}@example-${i % 17}.test>`,
      `MIME-Version: 1.0`,
      ...(i % 3 === 0 ? [`List-Unsubscribe: <mailto:unsubscribe-${i}@example-${i % 17}.test>`] : []),
      `X-Mailer: bench-mailer 1.${i % 9}`,
    ];
    let body: string;
    if (kind === 'plain') {
      header.push('Content-Type: text/plain; charset=utf-8', 'Content-Transfer-Encoding: 7bit');
      body = text(target, inBody);
    } else if (kind === 'alternative') {
      const b = `=_alt_${i}`;
      const t = text(Math.round(target * 0.4), inBody);
      const paragraphs = text(Math.round(target * 0.5), inBody).replace(/\r\n\r\n/g, '</p>\r\n<p>');
      const html = `<html><body><p>${paragraphs}</p></body></html>`;
      header.push(`Content-Type: multipart/alternative; boundary="${b}"`);
      body = [
        `--${b}`,
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: 7bit',
        '',
        t,
        `--${b}`,
        'Content-Type: text/html; charset=utf-8',
        'Content-Transfer-Encoding: 7bit',
        '',
        html,
        `--${b}--`,
        '',
      ].join('\r\n');
    } else {
      const b = `=_mixed_${i}`;
      const t = text(Math.min(2048, Math.round(target * 0.2)), inBody);
      // Bytes that are not text, base64 in lines of 76 (RFC 2045 §6.8).
      const raw = Buffer.alloc(Math.max(512, Math.round(target * 0.6)));
      for (let k = 0; k < raw.length; k++) raw[k] = Math.floor(rnd() * 256);
      const b64 = raw.toString('base64').replace(/.{76}/g, '$&\r\n');
      header.push(`Content-Type: multipart/mixed; boundary="${b}"`);
      body = [
        `--${b}`,
        'Content-Type: text/plain; charset=utf-8',
        'Content-Transfer-Encoding: 7bit',
        '',
        t,
        `--${b}`,
        `Content-Type: application/pdf; name="statement-${i}.pdf"`,
        `Content-Disposition: attachment; filename="statement-${i}.pdf"`,
        'Content-Transfer-Encoding: base64',
        '',
        b64.trimEnd(),
        `--${b}--`,
        '',
      ].join('\r\n');
    }
    messages.push({ bytes: Buffer.from(`${header.join('\r\n')}\r\n\r\n${body}`), date });
  }
  return { messages, subjectHits, bodyHits };
}

// ---- a minimal IMAP client --------------------------------------------------------------------------

interface Reply {
  status: string;
  /** Octets received for the command, untagged and tagged responses together. */
  bytes: number;
  /** Octets inside literals ({n} payloads): the message data itself. */
  literalBytes: number;
  /** The numbers of `* SEARCH` responses. */
  search: number[];
  /** `* n EXISTS`, if any. */
  exists: number | null;
  line: string;
}

/**
 * One connection: a command at a time; responses scanned line by line, literals skipped by length
 * without being copied, so the client's work is a few index lookups per response on either side.
 */
class ImapConn {
  private partial: Buffer[] = [];
  private skip = 0;
  private current: (Reply & { tag: string; done: (r: Reply) => void; fail: (e: Error) => void }) | null = null;
  private greeting: ((line: string) => void) | null = null;
  private n = 0;

  private readonly socket: net.Socket;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', (err) => this.current?.fail(err));
    socket.on('close', () => this.current?.fail(new Error('connection closed')));
  }

  static open(port: number, localAddress?: string): Promise<ImapConn> {
    return new Promise((resolve, reject) => {
      const socket = net.connect({ port, host: '127.0.0.1', ...(localAddress ? { localAddress } : {}) });
      socket.setNoDelay(true);
      const conn = new ImapConn(socket);
      socket.once('error', reject);
      conn.greeting = (line) => {
        socket.off('error', reject);
        if (!line.startsWith('* OK')) reject(new Error(`greeting: ${line.trim()}`));
        else resolve(conn);
      };
    });
  }

  command(text: string): Promise<Reply> {
    const tag = `a${++this.n}`;
    return new Promise((done, fail) => {
      this.current = { tag, done, fail, status: '', bytes: 0, literalBytes: 0, search: [], exists: null, line: '' };
      this.socket.write(`${tag} ${text}\r\n`);
    });
  }

  /** `command`, failing unless the answer is OK. */
  async ok(text: string): Promise<Reply> {
    const r = await this.command(text);
    if (r.status !== 'OK') throw new Error(`${text}: ${r.line.trim()}`);
    return r;
  }

  close(): void {
    this.socket.destroy();
  }

  private onData(chunk: Buffer): void {
    if (this.current) this.current.bytes += chunk.length;
    let at = 0;
    while (at < chunk.length) {
      if (this.skip > 0) {
        const take = Math.min(this.skip, chunk.length - at);
        this.skip -= take;
        at += take;
        continue;
      }
      const lf = chunk.indexOf(0x0a, at);
      if (lf < 0) {
        this.partial.push(chunk.subarray(at));
        break;
      }
      let line = chunk.subarray(at, lf + 1);
      at = lf + 1;
      if (this.partial.length) {
        line = Buffer.concat([...this.partial, line]);
        this.partial = [];
      }
      this.onLine(line);
    }
  }

  private onLine(buf: Buffer): void {
    // A line ending in {n} announces n octets of literal: skipped, never looked at.
    if (buf.length >= 4 && buf[buf.length - 3] === 0x7d) {
      const open = buf.lastIndexOf(0x7b);
      const n = Number(buf.subarray(open + 1, buf.length - 3).toString('latin1'));
      this.skip = n;
      if (this.current) this.current.literalBytes += n;
      if (buf[0] !== 0x2a) return;
    }
    const c = this.current;
    if (this.greeting) {
      const g = this.greeting;
      this.greeting = null;
      return g(buf.toString('latin1'));
    }
    if (!c) return;
    if (buf[0] === 0x2a /* * */) {
      if (buf.length < 64) {
        const s = buf.toString('latin1');
        const m = /^\* (\d+) EXISTS/.exec(s);
        if (m) c.exists = Number(m[1]);
      }
      if (buf.subarray(0, 9).toString('latin1') === '* SEARCH ' || buf.length === 10) {
        const s = buf.toString('latin1').trim();
        if (s.startsWith('* SEARCH')) c.search = s.slice(8).trim().split(' ').filter(Boolean).map(Number);
      }
      return;
    }
    const s = buf.subarray(0, c.tag.length + 1).toString('latin1');
    if (s !== `${c.tag} `) return;
    const line = buf.toString('latin1');
    c.status = line.slice(c.tag.length + 1).split(' ')[0]!;
    c.line = line;
    this.current = null;
    c.done(c);
  }
}

// ---- the two sides ----------------------------------------------------------------------------------

interface Target {
  name: 'svc' | 'dovecot';
  port: number;
  username: string;
  password: string;
  /** Memory of the side now, bytes: RSS, and PSS where it is many processes. */
  memory(): { rss: number; pss: number; processes: number };
}

const OPS = {
  headers: 'FETCH 1:* (BODY.PEEK[HEADER])',
  bodies: 'FETCH 1:* (BODY.PEEK[])',
  searchHeader: `SEARCH HEADER Subject ${SUBJECT_WORD}`,
  searchBody: `SEARCH BODY ${NEEDLE}`,
} as const;
type Op = keyof typeof OPS;
const OP_NAMES = Object.keys(OPS) as Op[];

interface OpResult {
  ms: number;
  bytes: number;
  literalBytes: number;
  count: number;
}
interface SideRun {
  ops: Record<Op, OpResult>;
}
interface MemoryRun {
  connections: number;
  before: { rss: number; pss: number; processes: number };
  after: { rss: number; pss: number; processes: number };
  openSeconds: number;
}

async function session(t: Target, localAddress?: string): Promise<{ conn: ImapConn; exists: number | null }> {
  const conn = await ImapConn.open(t.port, localAddress);
  await conn.ok(`LOGIN ${t.username} "${t.password}"`);
  const sel = await conn.ok('SELECT INBOX');
  return { conn, exists: sel.exists };
}

/** Every operation, `reps` times each on one connection; per operation the median rep. */
async function timeOps(t: Target, reps: number): Promise<SideRun> {
  const { conn, exists } = await session(t);
  if (exists !== MESSAGES) throw new Error(`${t.name}: SELECT says ${exists} messages, ${MESSAGES} loaded`);
  const ops = {} as Record<Op, OpResult>;
  try {
    for (const op of OP_NAMES) {
      const samples: OpResult[] = [];
      for (let i = 0; i < reps; i++) {
        const t0 = performance.now();
        const r = await conn.ok(OPS[op]);
        samples.push({
          ms: performance.now() - t0,
          bytes: r.bytes,
          literalBytes: r.literalBytes,
          count: op.startsWith('search') ? r.search.length : r.literalBytes,
        });
      }
      samples.sort((a, b) => a.ms - b.ms);
      ops[op] = samples[samples.length >> 1]!;
    }
    await conn.ok('LOGOUT').catch(() => {});
  } finally {
    conn.close();
  }
  return { ops };
}

/** `n` connections logged in with INBOX selected, opened ten at a time; memory before and after. */
async function idleConnections(t: Target, n: number): Promise<MemoryRun> {
  const before = t.memory();
  const conns: ImapConn[] = [];
  const t0 = performance.now();
  try {
    let next = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < n) {
          const i = next++;
          const addr = `127.0.${1 + Math.floor(i / PER_ADDRESS / 250)}.${1 + (Math.floor(i / PER_ADDRESS) % 250)}`;
          const s = await session(t, addr);
          conns.push(s.conn);
        }
      }),
    );
    const openSeconds = (performance.now() - t0) / 1000;
    // Settle: logins done, the last responses written; then read.
    await sleep(2_000);
    const after = t.memory();
    return { connections: conns.length, before, after, openSeconds };
  } finally {
    for (const c of conns) c.close();
    await sleep(1_000);
  }
}

// ---- the run ----------------------------------------------------------------------------------------

let postgresVersion = '';
let dovecotVersion = '';
const loadAtStart = os.loadavg()[0]!;
const profDir = path.join(os.tmpdir(), `svc-bench-prof-${Date.now().toString(36)}`);
const trials: { run: number; first: string; svc?: SideRun; dovecot?: SideRun }[] = [];
const memTrials: { run: number; svc?: MemoryRun; dovecot?: MemoryRun }[] = [];
let corpusInfo = { messages: 0, bytes: 0, subjectHits: 0, bodyHits: 0, loadSeconds: { svc: 0, dovecot: 0 } };

try {
  const t0 = performance.now();
  const { messages, subjectHits, bodyHits } = corpus(MESSAGES);
  const total = messages.reduce((s, m) => s + m.bytes.length, 0);
  corpusInfo = { messages: messages.length, bytes: total, subjectHits, bodyHits, loadSeconds: { svc: 0, dovecot: 0 } };
  console.log(
    `corpus: ${messages.length} messages, ${(total / 1e6).toFixed(1)} MB, ${subjectHits} with "${SUBJECT_WORD}" ` +
      `in the subject, ${bodyHits} with "${NEEDLE}" in the body (${((performance.now() - t0) / 1000).toFixed(1)} s)`,
  );

  // ---- the service --------------------------------------------------------------------------------
  const created = await benchDatabase(args.pg, 'svc_imapbench', cleanups);
  postgresVersion = created.version;
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'svc-imapbench-data-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const imapPort = await freePort();
  const svc = await startChild(
    'all',
    {
      SVC_DATABASE_URL: created.url,
      SVC_DATA_DIR: dataDir,
      SVC_MASTER_KEY: randomBytes(32).toString('base64'),
      SVC_BLOB_STORE: 'local',
      SVC_IMAP_PORT: String(imapPort),
    },
    args['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [],
  );
  cleanups.push(() => svc.stop());
  const svcPid = childPid();
  const db = openPostgres(created.url, 2);
  cleanups.push(() => db.close());
  const t1 = performance.now();
  const inbox = await makeInbox(svc.url, db);
  await importAll(inbox, messages);
  corpusInfo.loadSeconds.svc = (performance.now() - t1) / 1000;
  console.log(`svc: ${messages.length} messages imported in ${corpusInfo.loadSeconds.svc.toFixed(1)} s`);

  // ---- Dovecot --------------------------------------------------------------------------------------
  const t2 = performance.now();
  const mailRoot = await mkdtemp(path.join(os.tmpdir(), 'svc-imapbench-maildir-'));
  cleanups.push(() => rm(mailRoot, { recursive: true, force: true }));
  await (await import('node:fs/promises')).chmod(mailRoot, 0o755);
  const maildir = path.join(mailRoot, 'Maildir');
  await writeMaildir(maildir, messages, 'dovecot');
  const dc = await startDovecot({ maildir, username: inbox.address, password: inbox.password });
  cleanups.push(() => dc.stop());
  dovecotVersion = dc.version;
  corpusInfo.loadSeconds.dovecot = (performance.now() - t2) / 1000;
  console.log(`dovecot ${dc.version}: Maildir written in ${corpusInfo.loadSeconds.dovecot.toFixed(1)} s`);

  const targets: Record<'svc' | 'dovecot', Target> = {
    svc: {
      name: 'svc',
      port: imapPort,
      username: inbox.address,
      password: inbox.password,
      // The service's processes: `svc start` and, with SVC_WORKERS (one per core by default), its workers.
      memory: () => memoryOfAll([svcPid, ...svcChildren(svcPid)]),
    },
    dovecot: {
      name: 'dovecot',
      port: dc.port,
      username: dc.username,
      password: dc.password,
      memory: () => memoryOfAll(dc.pids()),
    },
  };

  // ---- warm-up: one untimed pass of everything on both sides ---------------------------------------
  const expected: Record<Op, number> = {
    headers: NaN,
    bodies: total,
    searchHeader: subjectHits,
    searchBody: bodyHits,
  };
  for (const name of ['dovecot', 'svc'] as const) {
    const w0 = performance.now();
    const warm = await timeOps(targets[name], 1);
    console.log(`warm-up ${name}: ${((performance.now() - w0) / 1000).toFixed(1)} s`);
    if (name === 'dovecot') expected.headers = warm.ops.headers.literalBytes;
  }

  const check = (name: string, r: SideRun) => {
    for (const op of OP_NAMES) {
      if (r.ops[op].count !== expected[op])
        throw new Error(`${name}: ${OPS[op]} returned ${r.ops[op].count}, expected ${expected[op]}`);
    }
  };

  for (let r = 1; r <= RUNS; r++) {
    const order = r % 2 ? (['svc', 'dovecot'] as const) : (['dovecot', 'svc'] as const);
    const trial: (typeof trials)[number] = { run: r, first: order[0] };
    for (const name of order) {
      try {
        const res = await timeOps(targets[name], REPS);
        check(name, res);
        trial[name] = res;
      } catch (err) {
        failures.push(`run ${r}, ${name}: ${(err as Error).message}`);
      }
    }
    trials.push(trial);
    console.log(
      `run ${r}: ` +
        OP_NAMES.map(
          (op) =>
            `${op} svc ${fixed(trial.svc?.ops[op].ms)} ms / dovecot ${fixed(trial.dovecot?.ops[op].ms)} ms ` +
            `= ${fixed(ratio(trial, op), 2)}×`,
        ).join('; '),
    );
  }
  for (let r = 1; r <= RUNS; r++) {
    const order = r % 2 ? (['svc', 'dovecot'] as const) : (['dovecot', 'svc'] as const);
    const m: (typeof memTrials)[number] = { run: r };
    for (const name of order) {
      try {
        m[name] = await idleConnections(targets[name], CONNECTIONS);
        if (m[name]!.connections !== CONNECTIONS) throw new Error(`${m[name]!.connections} connections opened`);
      } catch (err) {
        failures.push(`memory run ${r}, ${name}: ${(err as Error).message}`);
      }
    }
    memTrials.push(m);
    console.log(
      `memory run ${r}: svc +${mb(growth(m.svc, 'rss'))} MB RSS, ` +
        `dovecot +${mb(growth(m.dovecot, 'rss'))} MB RSS (+${mb(growth(m.dovecot, 'pss'))} MB PSS, ` +
        `${m.dovecot?.after.processes ?? '—'} processes)`,
    );
  }
  const log = await dc.log();
  const warnings = log.split('\n').filter((l) => /Warning|Error|Fatal/.test(l));
  if (warnings.length) console.log(`dovecot log, warnings and errors:\n  ${warnings.slice(0, 10).join('\n  ')}`);
} catch (err) {
  failures.push(err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await cleanup();
}

// ---- report -----------------------------------------------------------------------------------------

function mb(n: number | undefined): string {
  return fixed(n === undefined ? undefined : n / 1e6, 1);
}
function ratio(t: (typeof trials)[number], op: Op): number | undefined {
  return t.svc && t.dovecot ? t.dovecot.ops[op].ms / t.svc.ops[op].ms : undefined;
}
function growth(m: MemoryRun | undefined, k: 'rss' | 'pss'): number | undefined {
  return m ? m.after[k] - m.before[k] : undefined;
}
function stats(xs: (number | undefined)[]) {
  return medianRange(xs.filter((x): x is number => x !== undefined && Number.isFinite(x)));
}

const opsSummary = Object.fromEntries(
  OP_NAMES.map((op) => [
    op,
    {
      command: OPS[op],
      svcMs: stats(trials.map((t) => t.svc?.ops[op].ms)),
      dovecotMs: stats(trials.map((t) => t.dovecot?.ops[op].ms)),
      ratio: stats(trials.map((t) => ratio(t, op))),
      svcBytes: trials.find((t) => t.svc)?.svc?.ops[op].bytes,
      dovecotBytes: trials.find((t) => t.dovecot)?.dovecot?.ops[op].bytes,
      count: trials.find((t) => t.svc)?.svc?.ops[op].count,
    },
  ]),
) as Record<
  Op,
  {
    command: string;
    svcMs: ReturnType<typeof stats>;
    dovecotMs: ReturnType<typeof stats>;
    ratio: ReturnType<typeof stats>;
    svcBytes?: number;
    dovecotBytes?: number;
    count?: number;
  }
>;
const memory = {
  connections: CONNECTIONS,
  svcRssGrowth: stats(memTrials.map((m) => growth(m.svc, 'rss'))),
  dovecotRssGrowth: stats(memTrials.map((m) => growth(m.dovecot, 'rss'))),
  dovecotPssGrowth: stats(memTrials.map((m) => growth(m.dovecot, 'pss'))),
  ratioRss: stats(
    memTrials.map((m) => ((g, h) => (g && h ? h / g : undefined))(growth(m.svc, 'rss'), growth(m.dovecot, 'rss'))),
  ),
  ratioPss: stats(
    memTrials.map((m) => ((g, h) => (g && h ? h / g : undefined))(growth(m.svc, 'rss'), growth(m.dovecot, 'pss'))),
  ),
  trials: memTrials,
};
const summary = {
  date: new Date().toISOString(),
  machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version, loadAtStart },
  postgres: postgresVersion,
  dovecot: dovecotVersion,
  args: { messages: MESSAGES, runs: RUNS, reps: REPS, connections: CONNECTIONS },
  corpus: corpusInfo,
  ops: opsSummary,
  memory,
  trials,
  failures,
};
type Stats = ReturnType<typeof stats>;
function memoryLine(label: string, bytes: Stats, r: Stats | null): string {
  const inMb = { median: bytes.median / 1e6, min: bytes.min / 1e6, max: bytes.max / 1e6 };
  const each = fixed(bytes.median / CONNECTIONS / 1024, 0);
  const ratioText = r ? `   ratio ${span(r, 2)}` : '';
  return `    ${label.padEnd(26)} ${span(inMb, 1).padStart(22)} MB  (${each} KiB/connection)${ratioText}`;
}
console.log(
  [
    '',
    `svc-mail IMAP bench: ${MESSAGES} messages (${mb(corpusInfo.bytes)} MB), ${RUNS} runs × ${REPS} reps; ` +
      `${summary.machine.cpus} cores (${summary.machine.cpu}), load ${loadAtStart.toFixed(1)} at start; ` +
      `Dovecot ${dovecotVersion}, PostgreSQL ${postgresVersion}, Node ${process.version}`,
    '  median (min–max) of the runs; ratio = Dovecot / svc, goal ≥ 1.0',
    `  ${'command'.padEnd(34)} ${'svc ms'.padStart(20)} ${'Dovecot ms'.padStart(20)} ${'ratio'.padStart(20)}`,
    ...OP_NAMES.map((op) => {
      const o = opsSummary[op];
      const cols = [span(o.svcMs), span(o.dovecotMs), span(o.ratio, 2)].map((c) => c.padStart(20));
      return `  ${o.command.padEnd(34)} ${cols.join(' ')}`;
    }),
    `  ${CONNECTIONS} idle connections (LOGIN, SELECT INBOX): memory growth (the runs: see above)`,
    memoryLine('svc processes RSS sum', memory.svcRssGrowth, null),
    memoryLine('Dovecot processes RSS sum', memory.dovecotRssGrowth, memory.ratioRss),
    memoryLine('Dovecot processes PSS sum', memory.dovecotPssGrowth, memory.ratioPss),
  ].join('\n'),
);
await mkdir(path.join(HERE, 'results'), { recursive: true });
await writeFile(path.join(HERE, 'results', 'imap-latest.json'), `${JSON.stringify(summary, null, 2)}\n`);
if (args['cpu-prof']) console.log(`  CPU profiles of the service process (open in Chrome DevTools): ${profDir}`);
if (failures.length) {
  console.error(`\nFAILED:\n${failures.map((m) => `  ${m}`).join('\n')}`);
  process.exit(1);
}
process.exit(0);

// ---- setup ------------------------------------------------------------------------------------------

/** The service child (`svc start`), found among our children: its memory is what the bench reads. */
function childPid(): number {
  const [pid] = svcChildren(process.pid);
  if (pid === undefined) throw new Error('the service process is not among our children');
  return pid;
}

interface BenchInbox {
  owner: Client;
  projectId: string;
  capId: string;
  inboxId: string;
  address: string;
  password: string;
}

/**
 * A payg organization whose project claims DOMAIN (verified by the platform key) with an inbound
 * capability, marked verified in storage (no DNS), as bench/inbound.ts makes it; then one inbox created
 * through the API, whose initial password is the IMAP login, its storage limit raised to fit the corpus.
 */
async function makeInbox(url: string, db: ReturnType<typeof openPostgres>): Promise<BenchInbox> {
  const platform = createClient({ baseUrl: url, credential: { adminKey: ADMIN_KEY } });
  const { accountToken } = await createClient({ baseUrl: url }).auth.signup({
    email: 'owner@imap.bench.test',
    password: 'bench password 0123',
  });
  const owner = createClient({
    baseUrl: url,
    credential: { keyId: accountToken.tokenId, secret: accountToken.secret },
  });
  const { organization } = await owner.console.organizations.create({ name: 'IMAP bench' });
  await owner.console.organizations.plan({ id: organization.id, plan: 'payg' });
  const { project } = await owner.console.projects.create({ name: 'mail', organizationId: organization.id });
  const claim = await owner.console.projects.domains.create({ id: project.id, domain: DOMAIN });
  await platform.admin.senderDomains.markVerified({ id: claim.id });
  const withIn = await owner.console.projects.domains.inbound.create({ id: project.id, domainId: claim.id });
  const cap = withIn.inbound.find((i) => i.domain === DOMAIN);
  if (!cap) throw new Error(`no inbound capability for ${DOMAIN}`);
  await markInboundVerified(db, cap.id, new Date());
  const made = await owner.console.projects.inbound.inboxes.create({
    id: project.id,
    capId: cap.id,
    localpart: LOCALPART,
  });
  await owner.console.projects.inbound.inboxes.storage({
    id: project.id,
    capId: cap.id,
    inboxId: made.inbox.id,
    limitGb: 10,
  });
  return {
    owner,
    projectId: project.id,
    capId: cap.id,
    inboxId: made.inbox.id,
    address: made.inbox.address,
    password: made.initialPassword,
  };
}

/** The corpus through the import API, 200 per call (docs/api.md §8), two calls at a time, in order. */
async function importAll(inbox: BenchInbox, messages: readonly MaildirMessage[]): Promise<void> {
  const batches: MaildirMessage[][] = [];
  for (let i = 0; i < messages.length; i += 200) batches.push(messages.slice(i, i + 200));
  // In order, so that UIDs follow the corpus (message i is UID i + 1, as in the Maildir).
  for (const batch of batches) {
    const r = await inbox.owner.console.projects.inbound.inboxes.import({
      id: inbox.projectId,
      capId: inbox.capId,
      inboxId: inbox.inboxId,
      messages: batch.map((m) => ({ raw: m.bytes.toString('base64'), date: m.date.toISOString() })),
    });
    if (r.imported !== batch.length) throw new Error(`import: ${JSON.stringify(r)}`);
  }
}
