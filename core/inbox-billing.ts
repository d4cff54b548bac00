// Inbox billing for the current UTC month (docs/decisions.md #18, docs/api.md §8): what an
// organization's `inboxUsage` reports. Pure: the inboxes and the clock are passed in.
//
// An inbox's billing starts at the earlier of its first inbound mail and its first login (IMAP or
// webmail) — the caller passes that instant as billingStartedAt, null while the inbox is unused —
// and stops at deletion. Per inbox this month: round(activeDays × 100 / 30) cents, at most 100,
// where activeDays counts the UTC days from max(billing start, the 1st) to min(today, deletion
// day), both included. Decided here where the rule is silent:
// - started or deleted in an earlier month: a start before the 1st counts from the 1st; an inbox
//   deleted before the 1st contributes nothing, whenever it started;
// - a deletion before the billing start (cannot happen through the API) contributes nothing;
// - a billing start or deletion after `now` (clock skew between hosts) is treated as not yet
//   happened;
// - rounding is half up (Math.round): 1 day → 3 cents, 15 days → 50, 30 or 31 days → 100;
// - storage is charged on the reserved limit of live inboxes, used or not: 50 cents for each GB
//   (2^30 bytes, docs/decisions.md #17) above the first, prorated by nothing, as docs/api.md §8 says.

const DAY_MS = 86_400_000;
export const GB = 2 ** 30;
export const INBOX_MONTH_CENTS = 100;
export const STORAGE_GB_CENTS = 50;

export interface BilledInbox {
  billingStartedAt: Date | null;
  deletedAt: Date | null;
  limitBytes: number;
}

export interface InboxUsage {
  activeInboxes: number;
  billedCents: number;
  storageOverageGb: number;
  storageBilledCents: number;
  totalBilledCents: number;
  /** YYYY-MM-DD, the first day of the current UTC month. */
  monthStart: string;
}

/** Days since the epoch of the UTC day that holds this instant. */
function utcDay(d: Date): number {
  return Math.floor(d.getTime() / DAY_MS);
}

/** Active UTC days of one inbox in the month that holds `now`. */
export function activeDays(inbox: BilledInbox, now: Date): number {
  const { billingStartedAt: started, deletedAt: deleted } = inbox;
  if (!started || started > now) return 0;
  const first = utcDay(new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)));
  const from = Math.max(utcDay(started), first);
  const to = deleted && deleted <= now ? utcDay(deleted) : utcDay(now);
  return to < from ? 0 : to - from + 1;
}

export function inboxCents(days: number): number {
  return Math.min(INBOX_MONTH_CENTS, Math.round((days * INBOX_MONTH_CENTS) / 30));
}

export function inboxUsage(inboxes: BilledInbox[], now: Date): InboxUsage {
  let activeInboxes = 0;
  let billedCents = 0;
  let storageOverageGb = 0;
  for (const inbox of inboxes) {
    const live = !inbox.deletedAt || inbox.deletedAt > now;
    if (live && inbox.billingStartedAt && inbox.billingStartedAt <= now) activeInboxes++;
    billedCents += inboxCents(activeDays(inbox, now));
    // Limits are whole GB (docs/api.md §4.11); Math.max keeps a smaller legacy limit from crediting.
    if (live) storageOverageGb += Math.max(0, inbox.limitBytes / GB - 1);
  }
  const storageBilledCents = Math.round(STORAGE_GB_CENTS * storageOverageGb);
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().slice(0, 10);
  return {
    activeInboxes,
    billedCents,
    storageOverageGb,
    storageBilledCents,
    totalBilledCents: billedCents + storageBilledCents,
    monthStart,
  };
}
