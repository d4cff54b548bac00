// Counts the outbound TLS sessions for SMTP TLS reports (RFC 8460) in memory, per (domain, UTC day, policy,
// result, receiving host), and adds them to Postgres about once a minute and at stop: one upsert per row,
// never a write per delivery (docs/operations.md, "TLS reporting"). A crash loses at most the last minute's
// counts, an accepted loss for statistics.
import type { Logger } from 'pino';
import type { Clock } from '../../mail/clock.js';
import type { TlsSession } from '../../mail/tls-report.js';
import type { Db } from '../../storage/pg/client.js';
import { addTlsCounts, type CountDelta } from '../../storage/pg/tls-reports.js';

/** Distinct rows held before a flush is started early (a burst of failures to many hosts). */
const MAX_ROWS = 10_000;

export function createTlsSessionRecorder(db: Db, clock: Clock, log: Logger) {
  let counts = new Map<string, CountDelta>();
  let flushing: Promise<void> = Promise.resolve();
  let early = false;

  const keyOf = (r: CountDelta) =>
    JSON.stringify([
      r.domain,
      r.day,
      r.policy.type,
      r.policy.strings,
      r.policy.mxHost,
      r.result,
      r.receivingMx,
      r.receivingIp,
    ]);

  function add(r: CountDelta) {
    const key = keyOf(r);
    const c = counts.get(key);
    if (!c) return void counts.set(key, r);
    c.sessions += r.sessions;
    if (r.detail) c.detail = r.detail;
  }

  /** One session; runs on the delivery path, so it only counts. */
  function record(s: TlsSession) {
    add({
      domain: s.domain.toLowerCase(),
      day: new Date(clock.now()).toISOString().slice(0, 10),
      policy: s.policy,
      result: s.result,
      receivingMx: s.receivingMx ?? '',
      receivingIp: s.receivingIp ?? '',
      detail: s.detail ?? '',
      sessions: 1,
    });
    if (counts.size >= MAX_ROWS && !early) {
      early = true;
      void flush().finally(() => (early = false));
    }
  }

  /** Adds what was counted since the last flush; on failure the counts are kept for the next one. */
  function flush(): Promise<void> {
    flushing = flushing.then(async () => {
      if (!counts.size) return;
      const rows = [...counts.values()];
      counts = new Map();
      try {
        await addTlsCounts(db, rows);
      } catch (err) {
        log.error({ err, rows: rows.length }, 'recording TLS report counts failed; kept for the next flush');
        for (const r of rows) add(r);
      }
    });
    return flushing;
  }

  return { record, flush };
}

export type TlsSessionRecorder = ReturnType<typeof createTlsSessionRecorder>;
