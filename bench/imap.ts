// `npm run bench:imap`: our IMAP server beside Debian's Dovecot, in one run on one machine (issue 13). Both
// serve the same --messages generated messages (default 10,000: plain, multipart/alternative and with an
// attachment, 1–50 KB):
//
//   a. the service (`svc start --role all`, a Postgres database of its own, the local blob store), the
//      messages loaded through the import API (docs/api.md §4.5, 200 a call) into one inbox;
//   b. a private Dovecot (bench/dovecot.ts) over a Maildir holding the same bytes.
//
// Timed, each --runs times, the two sides taking turns (the first side alternating), after one untimed pass of
// every operation (Dovecot builds its index on first access, our server warms its caches): LOGIN and SELECT
// INBOX on a fresh connection, then `FETCH 1:* (BODY.PEEK[HEADER])`, `FETCH 1:* (BODY.PEEK[])`,
// `SEARCH HEADER Subject <word>` and `SEARCH BODY <word>`, each answered in full (the bench's own small
// client reads every byte and checks both sides found the same messages). Then memory: --idle connections
// (default 1,000), each logged in with INBOX selected, held open; the growth of the service process's RSS
// beside the growth of the summed RSS of every Dovecot process. The clients come from 127.0.1.x, ten to an
// address, under both servers' per-address limits. Needs root (Dovecot), dovecot-imapd and a PostgreSQL
// server (--pg). Writes bench/results/imap-latest.json.
//
//   node --import tsx bench/imap.ts [--messages 10000] [--runs 3] [--idle 1000] [--pg URL]
import { randomBytes } from 'node:crypto';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createClient } from '@svc-mail/sdk';
import { openPostgres } from '../storage/pg/client.js';
import { markInboundVerified } from '../storage/pg/domains.js';
import { startDovecot, rssOf } from './dovecot.js';
import { ADMIN_KEY, startChild } from './service.js';
import { benchDatabase } from './util.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const { values: args } = parseArgs({
  options: {
    messages: { type: 'string', default: '10000' },
    runs: { type: 'string', default: '3' },
    idle: { type: 'string', default: '1000' },
    pg: { type: 'string', default: process.env.BENCH_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' },
  },
});
const N = Number(args.messages);
const RUNS = Math.max(1, Number(args.runs));
const IDLE = Number(args.idle);
const DOMAIN = 'imap-bench.test';
const SUBJECT_WORD = 'quarterly';
const BODY_WORD = 'zanzibar';

const cleanups: (() => Promise<unknown>)[] = [];
const cleanup = async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn().catch((err) => console.error(`cleanup: ${err}`));
};
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.once(sig, () => void cleanup().finally(() => process.exit(130)));

// ---- the messages -------------------------------------------------------------------------------------

/** A deterministic pseudo-random generator (mulberry32), so both sides and every run get the same mail. */
function rng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let x = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}
const WORDS = 'the of and to in is that for it as with was on be at by this had not are but from or have an'.split(' ');

function generate(n: number): Buffer[] {
  const r = rng(13);
  const words = (count: number) => Array.from({ length: count }, () => WORDS[Math.floor(r() * WORDS.length)]).join(' ');
  const lines = (bytes: number) => {
    const out: string[] = [];
    for (let size = 0; size < bytes;) {
      const l = words(12);
      out.push(l);
      size += l.length + 2;
    }
    return out.join('\r\n');
  };
  const out: Buffer[] = [];
  for (let i = 0; i < n; i++) {
    const subject = `${i % 50 === 0 ? `${SUBJECT_WORD} ` : ''}report ${i} ${words(4)}`;
    const needle = i % 100 === 7 ? ` ${BODY_WORD} ` : ' ';
    const head = [
      `From: Sender ${i % 97} <sender${i % 97}@example.org>`,
      `To: inbox@${DOMAIN}`,
      `Subject: ${subject}`,
      `Date: ${new Date(Date.UTC(2026, 0, 1) + i * 60_000).toUTCString().replace('GMT', '+0000')}`,
      `Message-ID: <bench-${i}@example.org>`,
      'MIME-Version: 1.0',
    ];
    const kind = r();
    let raw: string;
    if (kind < 0.7) {
      const text = `${lines(1000 + Math.floor(r() * 3000))}\r\n${needle}\r\n`;
      raw = [...head, 'Content-Type: text/plain; charset=utf-8', '', text].join('\r\n');
    } else if (kind < 0.9) {
      const text = `${lines(2000 + Math.floor(r() * 6000))}${needle}\r\n`;
      const b = `alt-${i}`;
      raw = [
        ...head,
        `Content-Type: multipart/alternative; boundary="${b}"`,
        '',
        `--${b}`,
        'Content-Type: text/plain; charset=utf-8',
        '',
        text,
        `--${b}`,
        'Content-Type: text/html; charset=utf-8',
        '',
        `<html><body><p>${text.replace(/\r\n/g, '</p><p>')}</p></body></html>`,
        `--${b}--`,
        '',
      ].join('\r\n');
    } else {
      const b = `mix-${i}`;
      const attachment = Buffer.alloc(15_000 + Math.floor(r() * 20_000), i % 251)
        .toString('base64')
        .replace(/.{76}/g, '$&\r\n');
      raw = [
        ...head,
        `Content-Type: multipart/mixed; boundary="${b}"`,
        '',
        `--${b}`,
        'Content-Type: text/plain; charset=utf-8',
        '',
        `${lines(800)}${needle}`,
        `--${b}`,
        'Content-Type: application/octet-stream; name="data.bin"',
        'Content-Transfer-Encoding: base64',
        'Content-Disposition: attachment; filename="data.bin"',
        '',
        attachment,
        `--${b}--`,
        '',
      ].join('\r\n');
    }
    out.push(Buffer.from(raw, 'utf8'));
  }
  return out;
}

// ---- a minimal IMAP client: writes a command, reads to its tagged completion, literals skipped by length --

interface Conn {
  /** Sends `command` under a fresh tag; resolves with the whole answer once its tagged line has come. */
  run(command: string): Promise<{ bytes: number; text: string; ok: boolean }>;
  close(): void;
}

function connect(port: number, localAddress?: string): Promise<Conn> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ port, host: '127.0.0.1', localAddress });
    socket.setNoDelay(true);
    let n = 0;
    let chunks: Buffer[] = [];
    let bytes = 0;
    let pending: { tag: string; done: (r: { bytes: number; text: string; ok: boolean }) => void } | null = null;
    let closedWith: (err: Error) => void = () => {};
    let greeted = false;
    // The scan's place: how far the current buffer has been read, and how much of a literal is left to skip.
    let skip = 0;
    let lineStart = 0;
    let buf: Buffer = Buffer.alloc(0);
    const keepText = { on: false };
    const onData = (d: Buffer) => {
      bytes += d.length;
      if (keepText.on) chunks.push(d);
      buf = buf.length ? Buffer.concat([buf.subarray(lineStart), d]) : d;
      lineStart = 0;
      let at = 0;
      for (;;) {
        if (skip) {
          const take = Math.min(skip, buf.length - at);
          skip -= take;
          at += take;
          lineStart = at;
          if (skip) break;
        }
        const lf = buf.indexOf(0x0a, at);
        if (lf < 0) break;
        const line = buf.toString('latin1', lineStart, lf + 1);
        at = lf + 1;
        lineStart = at;
        const literal = /\{(\d+)\}\r\n$/.exec(line);
        if (literal) {
          skip = Number(literal[1]);
          continue;
        }
        if (!greeted) {
          greeted = true;
          resolve(conn);
          continue;
        }
        if (pending && line.startsWith(`${pending.tag} `)) {
          const p = pending;
          pending = null;
          const text = keepText.on ? Buffer.concat(chunks).toString('latin1') : line;
          p.done({ bytes, text, ok: line.startsWith(`${p.tag} OK`) });
        }
      }
      buf = buf.subarray(lineStart);
      lineStart = 0;
    };
    socket.on('data', onData);
    socket.once('error', reject);
    // A server that closes mid-command: say so rather than wait forever.
    socket.once('close', () => {
      const why = new Error(`connection to ${port} closed (${greeted ? 'after' : 'before'} its greeting)`);
      if (!greeted) reject(why);
      else if (pending) {
        pending = null;
        closedWith(why);
      }
    });
    const conn: Conn = {
      run(command) {
        return new Promise((done, fail) => {
          closedWith = fail;
          const tag = `t${++n}`;
          bytes = 0;
          chunks = [];
          keepText.on = !/FETCH/.test(command);
          pending = { tag, done };
          socket.write(`${tag} ${command}\r\n`);
        });
      },
      close: () => socket.destroy(),
    };
  });
}

// ---- the two sides --------------------------------------------------------------------------------------

interface Side {
  name: string;
  port: number;
  login: string;
  password: string;
  rss(): Promise<number>;
}

const OPS: { name: string; command: string }[] = [
  { name: 'FETCH 1:* (BODY.PEEK[HEADER])', command: 'FETCH 1:* (BODY.PEEK[HEADER])' },
  { name: 'FETCH 1:* (BODY.PEEK[])', command: 'FETCH 1:* (BODY.PEEK[])' },
  { name: `SEARCH HEADER Subject ${SUBJECT_WORD}`, command: `SEARCH HEADER Subject ${SUBJECT_WORD}` },
  { name: `SEARCH BODY ${BODY_WORD}`, command: `SEARCH BODY ${BODY_WORD}` },
];

/** One pass: a fresh connection, LOGIN + SELECT, then each operation; ms per operation, and SEARCH hits. */
async function pass(side: Side): Promise<{ ms: Record<string, number>; found: Record<string, string> }> {
  try {
    return await passOf(side);
  } catch (err) {
    throw new Error(`${side.name}: ${(err as Error).message}`);
  }
}

async function passOf(side: Side): Promise<{ ms: Record<string, number>; found: Record<string, string> }> {
  const ms: Record<string, number> = {};
  const found: Record<string, string> = {};
  let t0 = performance.now();
  const c = await connect(side.port);
  const login = await c.run(`LOGIN "${side.login}" "${side.password}"`);
  if (!login.ok) throw new Error(`${side.name}: LOGIN failed: ${login.text}`);
  const select = await c.run('SELECT INBOX');
  if (!select.ok) throw new Error(`${side.name}: SELECT failed: ${select.text}`);
  ms['LOGIN + SELECT INBOX'] = performance.now() - t0;
  const exists = /\* (\d+) EXISTS/.exec(select.text)?.[1];
  if (Number(exists) !== N) throw new Error(`${side.name}: ${exists} messages, not ${N}`);
  for (const op of OPS) {
    t0 = performance.now();
    const r = await c.run(op.command);
    ms[op.name] = performance.now() - t0;
    if (!r.ok) throw new Error(`${side.name}: ${op.command} failed: ${r.text.slice(-300)}`);
    if (op.command.startsWith('SEARCH')) found[op.name] = /^\* SEARCH([ \d]*)/m.exec(r.text)?.[1]?.trim() ?? '';
  }
  c.close();
  return { ms, found };
}

/** Opens `count` idle connections (LOGIN, SELECT INBOX), ten to an address; the RSS growth they cost. */
async function idleMemory(side: Side, count: number): Promise<number> {
  const before = await side.rss();
  const conns: Conn[] = [];
  const open = async (i: number) => {
    const c = await connect(side.port, `127.0.1.${1 + Math.floor(i / 10)}`);
    if (!(await c.run(`LOGIN "${side.login}" "${side.password}"`)).ok) throw new Error(`${side.name}: idle LOGIN`);
    if (!(await c.run('SELECT INBOX')).ok) throw new Error(`${side.name}: idle SELECT`);
    conns.push(c);
  };
  for (let i = 0; i < count; i += 50)
    await Promise.all(Array.from({ length: Math.min(50, count - i) }, (_, j) => open(i + j)));
  await new Promise((r) => setTimeout(r, 2000));
  const after = await side.rss();
  for (const c of conns) c.close();
  return after - before;
}

// ---- the run --------------------------------------------------------------------------------------------

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (xs: number[], unit = 'ms') => {
  const s = [...xs].sort((a, b) => a - b);
  return `${median(xs).toFixed(0)} (${s[0]!.toFixed(0)}–${s.at(-1)!.toFixed(0)}) ${unit}`;
};

async function main() {
  const messages = generate(N);
  const totalBytes = messages.reduce((a, m) => a + m.length, 0);
  console.log(`${N} messages, ${(totalBytes / 1024 / 1024).toFixed(1)} MiB`);

  // Ours.
  const { url: dbUrl, version: pgVersion } = await benchDatabase(args.pg, 'svc_imapbench', cleanups);
  const dataDir = await mkdtemp(path.join(os.tmpdir(), 'svc-imapbench-data-'));
  cleanups.push(() => rm(dataDir, { recursive: true, force: true }));
  const imapPort = await freeLocalPort();
  const svc = await startChild('all', {
    SVC_DATABASE_URL: dbUrl,
    SVC_DATA_DIR: dataDir,
    SVC_MASTER_KEY: randomBytes(32).toString('base64'),
    SVC_BLOB_STORE: 'local',
    SVC_IMAP_PORT: String(imapPort),
  });
  cleanups.push(() => svc.stop());
  const db = openPostgres(dbUrl, 2);
  cleanups.push(() => db.close());
  console.log('loading the messages into the service (import API)…');
  const ours = await loadOurs(svc.url, db, messages);
  const us: Side = {
    name: 'svc',
    port: imapPort,
    login: ours.address,
    password: ours.password,
    rss: () => rssOf(svc.pid),
  };

  // Dovecot.
  console.log('writing the Maildir and starting Dovecot…');
  const dovecot = await startDovecot('bench@imap-bench.test', 'bench password', messages);
  cleanups.push(() => dovecot.stop());
  const them: Side = {
    name: 'Dovecot',
    port: dovecot.port,
    login: 'bench@imap-bench.test',
    password: 'bench password',
    rss: () => dovecot.rssBytes(),
  };

  // Warm both, and check they agree.
  console.log('warming up both sides…');
  const [a, b] = [await pass(us), await pass(them)];
  for (const op of Object.keys(a.found))
    if (a.found[op] !== b.found[op]) throw new Error(`${op}: svc found [${a.found[op]}], Dovecot [${b.found[op]}]`);

  const times: Record<string, { svc: number[]; dovecot: number[] }> = {};
  for (let run = 0; run < RUNS; run++) {
    for (const side of run % 2 ? [them, us] : [us, them]) {
      const { ms } = await pass(side);
      for (const [op, v] of Object.entries(ms)) {
        times[op] ??= { svc: [], dovecot: [] };
        times[op][side === us ? 'svc' : 'dovecot'].push(v);
      }
    }
  }
  const memory = { svc: await idleMemory(us, IDLE), dovecot: await idleMemory(them, IDLE) };

  const cpu = os.cpus();
  console.log(
    `\nsvc-mail IMAP bench: ${N} messages (${(totalBytes / 1024 / 1024).toFixed(1)} MiB), ${RUNS} runs; ` +
      `${cpu.length} cores (${cpu[0]?.model}); Dovecot ${dovecot.version}, PostgreSQL ${pgVersion}`,
  );
  const rows: Record<string, unknown>[] = [];
  for (const [op, t] of Object.entries(times)) {
    const ratios = t.svc.map((v, i) => t.dovecot[i]! / v);
    console.log(
      `  ${op.padEnd(36)} svc ${fmt(t.svc).padEnd(22)} Dovecot ${fmt(t.dovecot).padEnd(22)} ` +
        `Dovecot/svc ${median(ratios).toFixed(2)}× ` +
        `(${Math.min(...ratios).toFixed(2)}–${Math.max(...ratios).toFixed(2)})`,
    );
    rows.push({ op, svcMs: t.svc, dovecotMs: t.dovecot, ratioMedian: median(ratios) });
  }
  const mib = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MiB`;
  const less = (memory.dovecot / Math.max(1, memory.svc)).toFixed(2);
  console.log(
    `  ${`memory, ${IDLE} idle connections`.padEnd(36)} svc +${mib(memory.svc).padEnd(18)} ` +
      `Dovecot +${mib(memory.dovecot).padEnd(18)} Dovecot/svc ${less}×`,
  );
  await mkdir(path.join(HERE, 'results'), { recursive: true });
  await writeFile(
    path.join(HERE, 'results', 'imap-latest.json'),
    JSON.stringify(
      {
        date: new Date().toISOString(),
        machine: { cpus: cpu.length, cpu: cpu[0]?.model, node: process.version },
        dovecot: dovecot.version,
        postgres: pgVersion,
        messages: N,
        bytes: totalBytes,
        runs: RUNS,
        operations: rows,
        idle: { connections: IDLE, svcBytes: memory.svc, dovecotBytes: memory.dovecot },
      },
      null,
      2,
    ) + '\n',
  );
}

/** The inbox, its password, and every message imported (200 a call, docs/api.md §4.5). */
async function loadOurs(
  url: string,
  db: ReturnType<typeof openPostgres>,
  messages: readonly Buffer[],
): Promise<{ address: string; password: string }> {
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
  const cap = withIn.inbound.find((i) => i.domain === DOMAIN)!;
  await markInboundVerified(db, cap.id, new Date());
  const made = await owner.console.projects.inbound.inboxes.create({
    id: project.id,
    capId: cap.id,
    localpart: 'inbox',
  });
  await owner.console.projects.inbound.inboxes.storage({
    id: project.id,
    capId: cap.id,
    inboxId: made.inbox.id,
    limitGb: 1024,
  });
  for (let i = 0; i < messages.length; i += 200) {
    const out = await owner.console.projects.inbound.inboxes.import({
      id: project.id,
      capId: cap.id,
      inboxId: made.inbox.id,
      messages: messages.slice(i, i + 200).map((m, j) => ({
        raw: m.toString('base64'),
        read: false,
        date: new Date(Date.UTC(2026, 0, 1) + (i + j) * 60_000).toISOString(),
      })),
    });
    if (out.imported !== Math.min(200, messages.length - i))
      throw new Error(`import: ${JSON.stringify(out).slice(0, 300)}`);
  }
  return { address: `inbox@${DOMAIN}`, password: made.initialPassword };
}

function freeLocalPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

main().then(
  () => cleanup(),
  async (err) => {
    console.error(err);
    await cleanup();
    process.exitCode = 1;
  },
);
