// Inboxes for the IMAP tests, made at the storage level (the MX tests use test/helpers/inbox.ts): a
// verified inbound capability (an organization, project and verified claim under it) and an inbox with a
// password hashed as the product hashes it.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { hashPassword } from '../../core/passwords.js';
import type { Storage } from '../../storage/index.js';
import { createInbox, type Inbox } from '../../storage/pg/inboxes.js';
import { insertInboundCapability } from '../storage/mail-storage.js';
import { waitFor } from './wait-for.js';

export interface TestInbox {
  inbox: Inbox;
  address: string;
  password: string;
  mailboxes: Map<string, string>;
}

export async function makeInbox(storage: Storage, opts: { localpart?: string; domain?: string } = {}) {
  const domain = opts.domain ?? `${randomBytes(4).toString('hex')}.example.test`;
  const capabilityId = await insertInboundCapability(storage.db, domain);
  const localpart = opts.localpart ?? 'alice';
  const password = `pw-${randomBytes(6).toString('hex')}`;
  const created = await createInbox(storage.db, {
    capabilityId,
    localpart,
    type: 'individual',
    passwordHash: await hashPassword(password, 10),
    initialPasswordSealed: storage.sealer.seal(password, 'inbox-initial-password'),
    now: new Date(),
  });
  if (!created) throw new Error('inbox not created');
  return {
    inbox: created.inbox,
    address: `${localpart}@${domain}`,
    password,
    mailboxes: new Map(created.mailboxes.map((m) => [m.name, m.id])),
  } satisfies TestInbox;
}

/** A raw IMAP connection: write lines, wait for what the server said. */
export interface RawImap {
  socket: net.Socket;
  text(): string;
  send(line: string | Buffer): void;
  /** Waits until the transcript matches, returns it. */
  until(re: RegExp, what?: string): Promise<string>;
  closed(): boolean;
  close(): void;
}

export async function rawImap(port: number): Promise<RawImap> {
  const socket = net.connect(port, '127.0.0.1');
  let buf = '';
  let ended = false;
  socket.on('data', (d) => (buf += d.toString('latin1')));
  socket.on('error', () => {});
  socket.on('close', () => (ended = true));
  await new Promise<void>((resolve, reject) => {
    socket.once('connect', () => resolve());
    socket.once('error', reject);
  });
  return {
    socket,
    text: () => buf,
    send: (line) => void socket.write(typeof line === 'string' ? `${line}\r\n` : line),
    until: (re, what) => waitFor(() => (re.test(buf) ? buf : null), { what: what ?? String(re) }),
    closed: () => ended,
    close: () => socket.destroy(),
  };
}

/**
 * A raw connection past the greeting and logged in as `a`; with `select`, that mailbox selected; with `idle`
 * too, in IDLE (RFC 2177) once `+ idling` has come.
 */
export async function rawSession(
  port: number,
  a: { address: string; password: string },
  opts: { select?: string; idle?: boolean } = {},
): Promise<RawImap> {
  const raw = await rawImap(port);
  await raw.until(/^\* OK/);
  raw.send(`l LOGIN ${a.address} ${a.password}`);
  await raw.until(/\r\nl (OK|NO|BAD)/);
  if (opts.select) {
    raw.send(`s SELECT ${opts.select}`);
    await raw.until(/\r\ns OK/);
  }
  if (opts.idle) {
    raw.send('i IDLE');
    await raw.until(/\+ idling\r\n/);
  }
  return raw;
}
