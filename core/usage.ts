// Organization usage (docs/api.md §2.2): the sending allowance of the UTC day and inbox billing.
import type { Organization } from '../storage/pg/organizations.js';
import { acceptedToday } from '../storage/pg/messages.js';
import type { CoreDeps } from './deps.js';
import { inboxUsage as billInboxes, type InboxUsage } from './inbox-billing.js';
import { billedInboxesOfOrganization } from '../storage/pg/inboxes.js';

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

/**
 * docs/decisions.md #18: inbox billing of the current UTC month, by the rule of core/inbox-billing.ts over the
 * organization's inboxes that can still count this month (live ones, and those deleted since the 1st).
 */
export async function inboxUsage(deps: CoreDeps, org: Organization, now: Date): Promise<InboxUsage> {
  const monthStart = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1));
  return billInboxes(await billedInboxesOfOrganization(deps.storage.db, org.id, monthStart), now);
}
