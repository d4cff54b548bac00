// The change feed (mail/mail-store.ts has the contract): wakes IMAP IDLE and webmail sessions after a
// change to a mailbox commits. Two paths:
//   - in this process, an emitter called by the mail store right after its transaction commits;
//   - across processes and hosts sharing a real Postgres, a NOTIFY issued inside the writing transaction
//     (so it is delivered at commit, and never for a rolled-back change) and one LISTEN connection per
//     process. Each handle tags its notifications with a random origin and ignores its own, which its
//     emitter has already delivered.
// The embedded database (PGlite) lives in one process with every role, so the emitter is all it needs.
import { randomUUID } from 'node:crypto';
import type { Db, Queryable } from './client.js';
import type { ChangeFeed, ChangeFilter, ChangeNotice } from '../../mail/mail-store.js';

export const CHANGE_CHANNEL = 'svc_mail_changes';

export interface ChangeFeedWriter extends ChangeFeed {
  /** Inside the writing transaction: queues the notification other processes get at commit. */
  notifyIn(q: Queryable, notice: ChangeNotice): Promise<void>;
  /** After the commit: wakes this process's subscribers. */
  publish(notice: ChangeNotice): void;
  close(): Promise<void>;
}

type Listener = (notice: ChangeNotice) => void;

interface Wire {
  o: string;
  i: string;
  m: string;
  s: number;
}

function parseWire(payload: string): Wire | null {
  try {
    const w = JSON.parse(payload) as Partial<Wire>;
    const ok =
      typeof w.o === 'string' && typeof w.i === 'string' && typeof w.m === 'string' && Number.isSafeInteger(w.s);
    return ok ? (w as Wire) : null;
  } catch {
    return null;
  }
}

export function openChangeFeed(db: Db, opts: { onError?: (err: unknown) => void } = {}): ChangeFeedWriter {
  const origin = randomUUID();
  const crossProcess = db.kind === 'postgres';
  const byMailbox = new Map<string, Set<Listener>>();
  const byInbox = new Map<string, Set<Listener>>();
  let listening: Promise<() => Promise<void>> | null = null;
  let closed = false;

  function deliver(notice: ChangeNotice) {
    const targets = [...(byMailbox.get(notice.mailboxId) ?? []), ...(byInbox.get(notice.inboxId) ?? [])];
    for (const l of targets) {
      // One subscriber's failure must not keep the others asleep.
      try {
        l(notice);
      } catch (err) {
        opts.onError?.(err);
      }
    }
  }

  function onPayload(payload: string) {
    const w = parseWire(payload);
    if (!w || w.o === origin) return;
    deliver({ inboxId: w.i, mailboxId: w.m, modseq: w.s });
  }

  return {
    async subscribe(filter: ChangeFilter, onChange) {
      if (closed) throw new Error('change feed closed');
      const [map, key] = 'mailboxId' in filter ? [byMailbox, filter.mailboxId] : [byInbox, filter.inboxId];
      let set = map.get(key);
      if (!set) map.set(key, (set = new Set()));
      const listener: Listener = (n) => onChange(n);
      set.add(listener);
      const unsubscribe = () => {
        set.delete(listener);
        if (!set.size && map.get(key) === set) map.delete(key);
      };
      if (crossProcess) {
        listening ??= db.listen(CHANGE_CHANNEL, onPayload);
        try {
          await listening;
        } catch (err) {
          listening = null;
          unsubscribe();
          throw err;
        }
      }
      return unsubscribe;
    },

    async notifyIn(q, notice) {
      if (!crossProcess) return;
      const wire: Wire = { o: origin, i: notice.inboxId, m: notice.mailboxId, s: notice.modseq };
      await q.query('SELECT pg_notify($1, $2)', [CHANGE_CHANNEL, JSON.stringify(wire)]);
    },

    publish: deliver,

    async close() {
      closed = true;
      byMailbox.clear();
      byInbox.clear();
      const stop = await listening?.catch(() => null);
      await stop?.();
    },
  };
}
