// Organization usage (docs/api.md §2.2): the sending allowance of the UTC day and inbox billing.
import type { Organization } from '../storage/pg/organizations.js';
import { acceptedToday } from '../storage/pg/messages.js';
import type { CoreDeps } from './deps.js';

/** docs/api.md §8: a free organization may send 500 messages per UTC day; payg is unlimited, with 500 free. */
export const FREE_DAILY_LIMIT = 500;

export async function orgUsage(deps: CoreDeps, org: Organization, now: Date) {
  // docs/decisions.md #11 and #13: messages answered 200 this UTC day, queued or suppressed.
  const usedToday = await acceptedToday(deps.storage.db, org.id, now);
  const free = org.plan === 'free';
  return {
    tier: org.plan,
    dailyLimit: free ? FREE_DAILY_LIMIT : null,
    usedToday,
    remaining: free ? Math.max(0, FREE_DAILY_LIMIT - usedToday) : null,
    overageToday: free ? 0 : Math.max(0, usedToday - FREE_DAILY_LIMIT),
  };
}

export async function inboxUsage(_deps: CoreDeps, _org: Organization, now: Date) {
  // Inboxes arrive with receiving; until then there is nothing to bill.
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)).toISOString().slice(0, 10);
  return {
    activeInboxes: 0,
    billedCents: 0,
    storageOverageGb: 0,
    storageBilledCents: 0,
    totalBilledCents: 0,
    monthStart,
  };
}
