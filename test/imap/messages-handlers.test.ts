// imap/handlers/messages.ts through the real dispatcher (imap/commands.ts): FETCH, SEARCH, STORE,
// COPY, MOVE and their UID forms, with CONDSTORE. The MailboxBackend here is an in-memory fake of our
// own interface, written for these unit tests only; the server's tests drive the real store end to end.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { parseMimeTree } from '../../mail/mime-tree.js';
import { dispatch } from '../../imap/commands.js';
import {
  BackendError,
  type CopyResult,
  type MailboxBackend,
  type MessageMeta,
  type StoreRequest,
  type StoreResult,
} from '../../imap/backend.js';
import { newSelected, type Session } from '../../imap/session.js';
import { readRaw } from './parse-helpers.js';

const DIR = fileURLToPath(new URL('../fixtures/mime/', import.meta.url));
const PREFIX = 'Received: from relay.example by us; Fri, 7 Jun 2024 10:00:01 +0000\r\n';

interface Stored {
  blob: Buffer;
  prefix: Buffer;
  flags: string[];
  modseq: bigint;
  internalDate: Date;
}

interface Box {
  id: string;
  uidValidity: number;
  uidNext: number;
  modseq: bigint;
  messages: Map<number, Stored>;
}

/** An in-memory MailboxBackend: just the operations the message commands use. */
function memoryBackend() {
  const boxes = new Map<string, Box>();
  const byId = (id: string): Box => [...boxes.values()].find((b) => b.id === id)!;
  const calls: string[] = [];
  const box = (name: string, uidValidity: number): Box => {
    const b: Box = { id: `mb-${name}`, uidValidity, uidNext: 1, modseq: 1n, messages: new Map() };
    boxes.set(name, b);
    return b;
  };
  const add = (b: Box, blob: Buffer, prefix = '', flags: string[] = [], date = '2024-06-07T09:00:00Z'): number => {
    const uid = b.uidNext++;
    b.modseq++;
    b.messages.set(uid, { blob, prefix: Buffer.from(prefix), flags, modseq: b.modseq, internalDate: new Date(date) });
    return uid;
  };
  const apply = (b: Box, uids: readonly number[], req: StoreRequest): StoreResult => {
    const result: StoreResult = { changed: [], modified: [] };
    const modseq = b.modseq + 1n;
    for (const uid of uids) {
      const m = b.messages.get(uid);
      if (!m) continue;
      if (req.unchangedSince !== null && m.modseq > req.unchangedSince) {
        result.modified.push(uid);
        continue;
      }
      const lower = req.flags.map((f) => f.toLowerCase());
      let next =
        req.op === 'replace'
          ? [...req.flags]
          : req.op === 'add'
            ? [...m.flags, ...req.flags.filter((f) => !m.flags.some((x) => x.toLowerCase() === f.toLowerCase()))]
            : m.flags.filter((f) => !lower.includes(f.toLowerCase()));
      next = [...new Set(next)];
      if (next.join(' ') === m.flags.join(' ')) continue;
      m.flags = next;
      m.modseq = modseq;
      result.changed.push({ uid, flags: next, modseq });
    }
    if (result.changed.length) b.modseq = modseq;
    return result;
  };
  const copyInto = (from: Box, uids: readonly number[], target: string): CopyResult => {
    const to = boxes.get(target);
    if (!to) throw new BackendError('nonexistent', `no mailbox ${target}`);
    const out: CopyResult = { uidValidity: to.uidValidity, source: [], dest: [] };
    for (const uid of uids) {
      const m = from.messages.get(uid);
      if (!m) continue;
      out.source.push(uid);
      out.dest.push(add(to, m.blob, m.prefix.toString(), [...m.flags]));
    }
    return out;
  };
  const unused = () => {
    throw new Error('not used by the message commands');
  };
  const backend: MailboxBackend = {
    authenticate: unused,
    // The dispatcher checks the login before each command and syncs the selected mailbox after it.
    checkPrincipal: async () => true,
    listMailboxes: unused,
    createMailbox: unused,
    deleteMailbox: unused,
    renameMailbox: unused,
    setSubscribed: unused,
    status: unused,
    select: unused,
    // In pages of two, so that the handlers' paging is exercised on three messages.
    async *fetchMeta(_u, mailboxId, uids, opts): AsyncIterable<MessageMeta[]> {
      calls.push(`fetchMeta ${uids.join(',')}`);
      const b = byId(mailboxId);
      let page: MessageMeta[] = [];
      for (const uid of uids) {
        const m = b.messages.get(uid);
        if (!m || (opts.changedSince !== null && m.modseq <= opts.changedSince)) continue;
        if (page.length === 2) [yield page, (page = [])];
        page.push({
          uid,
          modseq: m.modseq,
          flags: [...m.flags],
          internalDate: m.internalDate,
          size: m.prefix.length + m.blob.length,
          tree: parseMimeTree(m.blob),
          headerEnd: parseMimeTree(m.blob).body.bodyStart,
          prefixLength: m.prefix.length,
        });
      }
      if (page.length) yield page;
    },
    async readBody(_u, mailboxId, uid, start, end) {
      calls.push(`readBody ${uid} ${start}-${end}`);
      const m = byId(mailboxId).messages.get(uid);
      if (!m) throw new BackendError('nonexistent', 'expunged');
      return Buffer.concat([m.prefix, m.blob]).subarray(start, end);
    },
    // One readBody after another (the calls log shows each), null for a message expunged meanwhile.
    async readBodies(u, mailboxId, ranges) {
      const out: Array<Buffer | null> = [];
      for (const r of ranges) {
        try {
          out.push(await backend.readBody(u, mailboxId, r.uid, r.start, r.end, r.ref));
        } catch (err) {
          if (!(err instanceof BackendError && err.code === 'nonexistent')) throw err;
          out.push(null);
        }
      }
      return out;
    },
    async markSeen(_u, mailboxId, uids) {
      calls.push(`markSeen ${uids.join(',')}`);
      return apply(byId(mailboxId), uids, { op: 'add', flags: ['\\Seen'], unchangedSince: null });
    },
    async store(_u, mailboxId, uids, req) {
      return apply(byId(mailboxId), uids, req);
    },
    async copy(_u, mailboxId, uids, target) {
      return copyInto(byId(mailboxId), uids, target);
    },
    async move(_u, mailboxId, uids, target) {
      const from = byId(mailboxId);
      const r = copyInto(from, uids, target);
      for (const uid of r.source) from.messages.delete(uid);
      return r;
    },
    append: unused,
    expunge: unused,
    quotaRoots: unused,
    quota: unused,
    // No change journal here: this session is the only one, and reports its own changes itself.
    changesSince: async () => [],
    waitForChange: unused,
    watch: unused,
  };
  return { backend, boxes, box, add, calls };
}

const fx = (name: string) => readFileSync(DIR + name);

/** INBOX with simple.eml (uid 1, with the prefix), alternative.eml (2) and nested-rfc822.eml (3); Archive. */
function setup(opts: { readOnly?: boolean; recent?: number[] } = {}) {
  const mem = memoryBackend();
  const inbox = mem.box('INBOX', 7);
  mem.add(inbox, fx('simple.eml'), PREFIX);
  mem.add(inbox, fx('alternative.eml'), '', ['\\Flagged']);
  mem.add(inbox, fx('nested-rfc822.eml'), '', ['\\Seen', '$Work']);
  mem.box('Archive', 99);
  const sent: Buffer[] = [];
  const session: Session = {
    state: 'selected',
    principal: { id: 'u1', username: 'bob' },
    selected: newSelected(
      {
        mailboxId: inbox.id,
        uids: [1, 2, 3],
        keywords: ['$Work'],
        readOnly: opts.readOnly ?? false,
        recentUids: opts.recent ?? [],
        messages: 3,
        recent: 0,
        unseen: 2,
        uidNext: 4,
        uidValidity: 7,
        highestModseq: inbox.modseq,
        size: 0,
        firstUnseenUid: 1,
      },
      opts.readOnly ?? false,
    ),
    enabled: new Set(),
    secure: true,
    clientId: null,
    remoteAddress: '127.0.0.1',
    config: {
      appendLimit: 1000,
      tlsAvailable: false,
      allowPlaintextAuth: true,
      serverName: 's',
      serverVersion: '1',
      loginFailureDelayMs: 0,
    },
    readLine: async () => null,
    send: (b) => void sent.push(b),
  };
  /** Runs one command line; resolves with everything written for it, as one string. */
  const run = async (line: string): Promise<string> => {
    sent.length = 0;
    await dispatch(session, mem.backend, readRaw(line), (err) => {
      throw err;
    });
    return Buffer.concat(sent).toString('latin1');
  };
  return { ...mem, inbox, session, run };
}

t.test('FETCH of metadata: FLAGS, UID, RFC822.SIZE, INTERNALDATE; \\Recent per session', async (t) => {
  const { run, inbox } = setup({ recent: [2] });
  const size1 = PREFIX.length + inbox.messages.get(1)!.blob.length;
  t.equal(
    await run('a FETCH 1:2 (FLAGS UID RFC822.SIZE INTERNALDATE)'),
    `* 1 FETCH (FLAGS () UID 1 RFC822.SIZE ${size1} INTERNALDATE " 7-Jun-2024 09:00:00 +0000")\r\n` +
      `* 2 FETCH (FLAGS (\\Flagged \\Recent) UID 2 RFC822.SIZE ${fx('alternative.eml').length} ` +
      'INTERNALDATE " 7-Jun-2024 09:00:00 +0000")\r\na OK FETCH completed\r\n',
  );
  t.equal(await run('b FETCH 4 FLAGS'), 'b BAD message 4 does not exist (3 messages)\r\n');
  t.equal(await run('c UID FETCH 7:9 FLAGS'), 'c OK UID FETCH completed\r\n', 'absent UIDs are no error');
  t.equal(
    await run('d UID FETCH 2:* FLAGS'),
    '* 2 FETCH (UID 2 FLAGS (\\Flagged \\Recent))\r\n* 3 FETCH (UID 3 FLAGS (\\Seen $Work))\r\n' +
      'd OK UID FETCH completed\r\n',
    'UID FETCH answers with UID unasked (RFC 3501 §6.4.8)',
  );
});

t.test('FETCH macros, ENVELOPE, BODY and BODYSTRUCTURE', async (t) => {
  const { run } = setup();
  const fast = await run('a FETCH 2 FAST');
  t.match(fast, /^\* 2 FETCH \(FLAGS \(\\Flagged\) INTERNALDATE "[^"]+" RFC822.SIZE \d+\)\r\n/);
  const all = await run('b FETCH 2 ALL');
  t.match(all, /RFC822.SIZE \d+ ENVELOPE \("Wed, 05 Jun 2024 12:00:00 \+0000" "Offers" /);
  const full = await run('c FETCH 2 FULL');
  t.match(full, / BODY \(\("text" "plain" .*\) "alternative"\)\)\r\n/);
  t.notMatch(full, /"boundary"/, 'FULL has BODY, without extension data');
  const bs = await run('d FETCH 2 BODYSTRUCTURE');
  t.match(bs, /BODYSTRUCTURE \(.* "alternative" \("boundary" "alt-1"\) NIL NIL NIL\)\)\r\n/);
});

t.test('BODY[...] sets \\Seen and reports the new FLAGS; PEEK and EXAMINE do not', async (t) => {
  const { run, inbox, calls } = setup();
  calls.length = 0;
  const peek = await run('a FETCH 1 BODY.PEEK[HEADER.FIELDS (Subject received)]');
  const fields = `${PREFIX}Subject: Lunch\r\n on Thursday?\r\n\r\n`;
  t.equal(
    peek,
    `* 1 FETCH (BODY[HEADER.FIELDS (Subject received)] {${fields.length}}\r\n${fields})\r\na OK FETCH completed\r\n`,
  );
  t.same(inbox.messages.get(1)!.flags, []);
  const headerEnd = PREFIX.length + fx('simple.eml').indexOf('\r\n\r\n') + 4;
  t.same(calls, ['fetchMeta 1', `readBody 1 0-${headerEnd}`], 'only the header was read');
  const text = await run('b FETCH 1 BODY[1]<0.7>');
  t.equal(text, '* 1 FETCH (BODY[1]<0> {7}\r\nHi Bob, FLAGS (\\Seen))\r\nb OK FETCH completed\r\n');
  t.same(inbox.messages.get(1)!.flags, ['\\Seen']);
  t.equal(await run('c FETCH 1 BODY[1]<0.2>'), '* 1 FETCH (BODY[1]<0> {2}\r\nHi)\r\nc OK FETCH completed\r\n');
  t.equal(
    await run('d FETCH 2 BODY[9]'),
    '* 2 FETCH (BODY[9] NIL FLAGS (\\Flagged \\Seen))\r\nd OK FETCH completed\r\n',
  );

  const ro = setup({ readOnly: true });
  await ro.run('e FETCH 1 RFC822');
  t.same(ro.inbox.messages.get(1)!.flags, [], 'EXAMINE: no \\Seen (RFC 3501 §6.3.2)');
});

t.test('RFC822, RFC822.HEADER and RFC822.TEXT serve the prefix with the header', async (t) => {
  const { run, inbox } = setup();
  const blob = fx('simple.eml');
  const whole = PREFIX + blob.toString('latin1');
  const split = whole.indexOf('\r\n\r\n') + 4;
  t.equal(
    await run('a FETCH 1 RFC822.HEADER'),
    `* 1 FETCH (RFC822.HEADER {${split}}\r\n${whole.slice(0, split)})\r\na OK FETCH completed\r\n`,
  );
  t.same(inbox.messages.get(1)!.flags, [], 'RFC822.HEADER is a peek');
  t.equal(
    await run('b FETCH 1 (RFC822.TEXT)'),
    `* 1 FETCH (RFC822.TEXT {${whole.length - split}}\r\n${whole.slice(split)} FLAGS (\\Seen))\r\n` +
      'b OK FETCH completed\r\n',
  );
  t.equal(
    await run('c FETCH 1 (RFC822 BODY[])'),
    `* 1 FETCH (RFC822 {${whole.length}}\r\n${whole} BODY[] {${whole.length}}\r\n${whole})\r\nc OK FETCH completed\r\n`,
  );
});

t.test('CONDSTORE: MODSEQ, CHANGEDSINCE, and MODSEQ with an implicit \\Seen', async (t) => {
  const { run, session, inbox } = setup();
  const m3 = inbox.messages.get(3)!.modseq;
  t.equal(
    await run(`a UID FETCH 1:* (FLAGS) (CHANGEDSINCE ${m3 - 1n})`),
    `* 3 FETCH (UID 3 FLAGS (\\Seen $Work) MODSEQ (${m3}))\r\na OK UID FETCH completed\r\n`,
    'CHANGEDSINCE implies MODSEQ and leaves out what did not change',
  );
  t.ok(session.enabled.has('CONDSTORE'), 'a CONDSTORE enabling command (RFC 7162 §3.1)');
  const out = await run('b FETCH 2 BODY[1.MIME]');
  t.match(out, /^\* 2 FETCH \(BODY\[1\.MIME\] \{\d+\}\r\nContent-Type: text\/plain; charset=utf-8\r\n/);
  t.match(out, / FLAGS \(\\Flagged \\Seen\) MODSEQ \(\d+\)\)\r\n/);
  t.equal(
    await run('c FETCH 1 MODSEQ'),
    `* 1 FETCH (MODSEQ (${inbox.messages.get(1)!.modseq}))\r\nc OK FETCH completed\r\n`,
  );
});

t.test('SEARCH and UID SEARCH; MODSEQ in the answer; charsets', async (t) => {
  const { run, session } = setup({ recent: [3] });
  t.equal(await run('a SEARCH UNSEEN'), '* SEARCH 1 2\r\na OK SEARCH completed\r\n');
  t.equal(await run('b UID SEARCH FLAGGED'), '* SEARCH 2\r\nb OK UID SEARCH completed\r\n');
  t.equal(await run('c SEARCH CHARSET UTF-8 BODY "html offers"'), '* SEARCH 3\r\nc OK SEARCH completed\r\n');
  t.equal(
    await run('d SEARCH HEADER Received relay'),
    '* SEARCH 1\r\nd OK SEARCH completed\r\n',
    'the prefix is searched',
  );
  t.equal(await run('e SEARCH KEYWORD $nothing'), '* SEARCH\r\ne OK SEARCH completed\r\n');
  t.equal(await run('f SEARCH RECENT'), '* SEARCH 3\r\nf OK SEARCH completed\r\n');
  t.equal(
    await run('g SEARCH CHARSET KOI8-R ALL'),
    'g NO [BADCHARSET (US-ASCII UTF-8)] charset KOI8-R is not supported\r\n',
  );
  t.notOk(session.enabled.has('CONDSTORE'));
  t.equal(await run('h UID SEARCH MODSEQ 3 UNSEEN'), '* SEARCH 2 (MODSEQ 3)\r\nh OK UID SEARCH completed\r\n');
  t.ok(session.enabled.has('CONDSTORE'));
  t.equal(await run('i SEARCH MODSEQ 1000'), '* SEARCH\r\ni OK SEARCH completed\r\n', 'no match, no MODSEQ');
});

t.test('SEARCH with UID keys reads only the candidate rows', async (t) => {
  const { run, calls } = setup();
  calls.length = 0;
  t.equal(await run('a UID SEARCH UID 3:* SEEN'), '* SEARCH 3\r\na OK UID SEARCH completed\r\n');
  t.same(calls, ['fetchMeta 3']);
});

t.test('STORE and UID STORE: FETCH responses, .SILENT, read-only', async (t) => {
  const { run, inbox } = setup();
  t.equal(await run('a STORE 1 +FLAGS (\\Flagged)'), '* 1 FETCH (FLAGS (\\Flagged))\r\na OK STORE completed\r\n');
  t.equal(await run('b STORE 1:2 +FLAGS.SILENT (\\Deleted)'), 'b OK STORE completed\r\n');
  t.same(inbox.messages.get(2)!.flags, ['\\Flagged', '\\Deleted']);
  t.equal(
    await run('c UID STORE 2 -FLAGS (\\Deleted)'),
    '* 2 FETCH (UID 2 FLAGS (\\Flagged))\r\nc OK UID STORE completed\r\n',
  );
  t.equal(await run('d STORE 3 FLAGS ($Work \\Seen)'), '* 3 FETCH (FLAGS ($Work \\Seen))\r\nd OK STORE completed\r\n');
  t.equal(await run('e STORE 9 FLAGS ()'), 'e BAD message 9 does not exist (3 messages)\r\n');
  const ro = setup({ readOnly: true });
  t.equal(await ro.run('f STORE 1 +FLAGS (\\Seen)'), 'f NO the mailbox is read-only\r\n');
});

t.test('STORE UNCHANGEDSINCE: [MODIFIED], MODSEQ even when .SILENT (RFC 7162 §3.1.3)', async (t) => {
  const { run, inbox, session } = setup();
  const m1 = inbox.messages.get(1)!.modseq;
  const m3 = inbox.messages.get(3)!.modseq;
  const out = await run(`a STORE 1:3 (UNCHANGEDSINCE ${m1}) +FLAGS.SILENT (\\Deleted)`);
  const next = inbox.modseq;
  t.equal(
    out,
    `* 1 FETCH (UID 1 MODSEQ (${next}))\r\na OK [MODIFIED 2:3] conditional STORE failed for some messages\r\n`,
  );
  t.ok(session.enabled.has('CONDSTORE'));
  t.same(inbox.messages.get(3)!.modseq, m3, 'message 3 is untouched');
  t.equal(
    await run(`b UID STORE 3 (UNCHANGEDSINCE ${m3}) +FLAGS (\\Answered)`),
    `* 3 FETCH (UID 3 FLAGS (\\Seen $Work \\Answered) MODSEQ (${inbox.modseq}))\r\nb OK UID STORE completed\r\n`,
  );
  t.equal(
    await run('c UID STORE 2 (UNCHANGEDSINCE 1) +FLAGS (\\Seen)'),
    'c OK [MODIFIED 2] conditional STORE failed for some messages\r\n',
  );
});

t.test('COPY and UID COPY: COPYUID; a missing target is [TRYCREATE]', async (t) => {
  const { run, boxes } = setup();
  t.equal(await run('a COPY 2:3 Archive'), 'a OK [COPYUID 99 2:3 1:2] COPY completed\r\n');
  t.equal(boxes.get('Archive')!.messages.size, 2);
  t.equal(await run('b UID COPY 1,3 Archive'), 'b OK [COPYUID 99 1,3 3:4] UID COPY completed\r\n');
  t.equal(await run('c UID COPY 50:60 Archive'), 'c OK UID COPY completed\r\n', 'nothing copied, no COPYUID');
  t.equal(await run('d COPY 1 Nowhere'), 'd NO [TRYCREATE] no mailbox Nowhere\r\n');
  t.equal(await run('e COPY 1:9 Archive'), 'e BAD message 9 does not exist (3 messages)\r\n');
});

t.test('MOVE and UID MOVE (RFC 6851): COPYUID untagged, then EXPUNGEs, highest first', async (t) => {
  const { run, session, inbox, boxes } = setup({ recent: [2, 3] });
  // imap/session.ts announceExpunged: highest sequence number first, so each is valid when sent and
  // none renumbers the next (RFC 3501 §7.4.1 allows either order; RFC 6851 §3.3's example is ascending).
  t.equal(
    await run('a MOVE 2:3 Archive'),
    '* OK [COPYUID 99 2:3 1:2] moved\r\n* 3 EXPUNGE\r\n* 2 EXPUNGE\r\na OK MOVE completed\r\n',
  );
  t.same(session.selected!.uids, [1], "the session's sequence-number map");
  t.equal(session.selected!.announcedExists, 1);
  t.same([...inbox.messages.keys()], [1]);
  t.equal(boxes.get('Archive')!.messages.size, 2);
  t.equal(
    await run('b UID MOVE 1 Archive'),
    '* OK [COPYUID 99 1 3] moved\r\n* 1 EXPUNGE\r\nb OK UID MOVE completed\r\n',
  );
  t.same(session.selected!.uids, []);
  t.equal(await run('c UID MOVE 1:* Archive'), 'c OK UID MOVE completed\r\n', 'an empty mailbox');
  const ro = setup({ readOnly: true });
  t.equal(await ro.run('d MOVE 1 Archive'), 'd NO the mailbox is read-only\r\n');
  const gone = setup();
  t.equal(await gone.run('e UID MOVE 1 Nowhere'), 'e NO [TRYCREATE] no mailbox Nowhere\r\n');
});
