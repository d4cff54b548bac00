// The catch-all outbound sink of `svc dev` (docs/development.md): an SMTP listener on loopback that takes
// every message the MTA delivers (the development zone's MX of every other domain points here) and keeps
// it in the data directory instead of sending it. A message is on disk (written, fsynced, renamed) before
// the sink answers 250: RFC 5321 §6.1, the 250 after DATA takes on the responsibility for the message.
// `svc dev messages` and the /dev/messages pages read the same files.
import { mkdir, open, readdir, readFile, rename } from 'node:fs/promises';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';
import { parseMimeTree } from '../mail/mime-tree.js';

export interface CaughtMessage {
  id: string;
  /** ISO 8601. */
  receivedAt: string;
  mailFrom: string;
  rcptTo: string[];
  /** The From and To header fields for people (names and encoded words decoded). */
  from: string;
  to: string;
  subject: string;
  size: number;
}

export interface Sink {
  port: number;
  close(): Promise<void>;
}

/** Where caught messages live: `<id>.eml` (the message as received) and `<id>.json` (its CaughtMessage). */
export const caughtDir = (dataDir: string) => path.join(dataDir, 'dev', 'caught');

/** Ids sort by arrival: 8 base-36 digits of milliseconds, then 6 hex digits. Nothing else is read as one. */
const ID = /^[0-9a-z]{8}[0-9a-f]{6}$/;
const newId = () => Date.now().toString(36).padStart(8, '0') + randomBytes(3).toString('hex');

async function writeDurably(file: string, data: Buffer | string): Promise<void> {
  const tmp = `${file}.tmp`;
  const fh = await open(tmp, 'w', 0o600);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
  await rename(tmp, file);
}

async function syncDir(dir: string): Promise<void> {
  const fh = await open(dir, 'r');
  try {
    await fh.sync();
  } finally {
    await fh.close();
  }
}

const people = (list: { name: string; address: string }[]) =>
  list.map((a) => (a.name ? `${a.name} <${a.address}>` : a.address)).join(', ');

/** Stores one message; the .json is written last, so a message is listed only once it is whole. */
export async function keep(dir: string, raw: Buffer, envelope: { mailFrom: string; rcptTo: string[] }) {
  const { display } = parseMimeTree(raw);
  const meta: CaughtMessage = {
    id: newId(),
    receivedAt: new Date().toISOString(),
    mailFrom: envelope.mailFrom,
    rcptTo: envelope.rcptTo,
    from: people(display.from),
    to: people(display.to),
    subject: display.subject,
    size: raw.length,
  };
  await writeDurably(path.join(dir, `${meta.id}.eml`), raw);
  await writeDurably(path.join(dir, `${meta.id}.json`), JSON.stringify(meta));
  await syncDir(dir);
  return meta;
}

export async function listCaught(dir: string): Promise<CaughtMessage[]> {
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const ids = names.flatMap((n) => (n.endsWith('.json') && ID.test(n.slice(0, -5)) ? [n.slice(0, -5)] : []));
  const all = await Promise.all(ids.map((id) => readMeta(dir, id)));
  // Newest first.
  return all.flatMap((m) => (m ? [m] : [])).sort((a, b) => (a.id < b.id ? 1 : -1));
}

async function readMeta(dir: string, id: string): Promise<CaughtMessage | null> {
  try {
    return JSON.parse(await readFile(path.join(dir, `${id}.json`), 'utf8')) as CaughtMessage;
  } catch {
    return null;
  }
}

/** One caught message and its bytes, or null (also for anything that is not an id: no path escapes). */
export async function readCaught(dir: string, id: string): Promise<{ meta: CaughtMessage; raw: Buffer } | null> {
  if (!ID.test(id)) return null;
  const meta = await readMeta(dir, id);
  if (!meta) return null;
  return { meta, raw: await readFile(path.join(dir, `${id}.eml`)) };
}

export async function startSink(opts: {
  dir: string;
  host: string;
  port: number;
  hostname: string;
  maxBytes: number;
  onCaught?: (m: CaughtMessage) => void;
  onError?: (err: unknown) => void;
}): Promise<Sink> {
  await mkdir(opts.dir, { recursive: true });
  const server = new SMTPServer({
    name: opts.hostname,
    banner: 'svc dev sink: every message is kept here, none is sent',
    // Plain SMTP on loopback: no certificate to make, and the MTA delivers without STARTTLS when none is offered.
    disabledCommands: ['STARTTLS', 'AUTH'],
    authOptional: true,
    size: opts.maxBytes,
    logger: false,
    onData(stream, session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', callback);
      stream.on('end', () => {
        const envelope = {
          mailFrom: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
          rcptTo: session.envelope.rcptTo.map((r) => r.address),
        };
        keep(opts.dir, Buffer.concat(chunks), envelope).then(
          (meta) => {
            opts.onCaught?.(meta);
            callback();
          },
          (err: unknown) => {
            opts.onError?.(err);
            // RFC 5321 §4.2.2: 451, a local error; the MTA keeps the message and tries again.
            const e = new Error('Could not store the message; try again later') as Error & { responseCode: number };
            e.responseCode = 451;
            callback(e);
          },
        );
      });
    },
  });
  server.on('error', (err) => opts.onError?.(err));
  await new Promise<void>((resolve, reject) => {
    server.server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
