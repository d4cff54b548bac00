// Delivers the platform's own mail (password resets, invitations, TLS reports) from the Postgres outbox through the
// same connection pools, authenticated as the notify domain (the domain of SVC_NOTIFY_FROM; docs/operations.md,
// "Platform mail"): DKIM-signed with the platform keys of that domain (storage/platform-dkim.ts), whether or not it
// is also a customer's sending domain; the envelope sender on that domain; From with SVC_NOTIFY_NAME; and
// Auto-Submitted: auto-generated (RFC 3834 §5). A message is never sent unsigned: without keys it waits.
import { createPrivateKey, randomUUID } from 'node:crypto';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import {
  claimNotifications,
  notificationFailed,
  notificationSent,
  type ClaimedNotification,
} from '../../storage/pg/notification-outbox.js';
import { ensurePlatformKeys, notifyDomainOf, type PlatformKey } from '../../storage/platform-dkim.js';
import { composeMessage } from '../../mail/compose.js';
import { dkimSign, type SigningKey } from '../../mail/dkim-sign.js';
import { AUTO_SUBMITTED, platformReturnPath, withPlatformHeaders } from '../../mail/platform-mail.js';
import { classify } from './bounce-classify.js';
import { nextAttempt } from './retry.js';
import type { Pools } from './pool.js';
import { sourceAddressFor } from './source-address.js';

const BATCH = 20;
/** Kinds whose sealed body is the whole message, built by its producer (a TLS report, RFC 8460 §5.3). */
export const RAW_KINDS: ReadonlySet<string> = new Set(['tls-report']);
const LEASE_MS = 10 * 60_000;

export function startNotificationSender(ctx: Context, storage: Storage, pools: Pools, pollMs = 500) {
  const { config, clock, log } = ctx;
  const { db, sealer } = storage;
  const notifyDomain = notifyDomainOf(config.notifyFrom);
  const from = { name: config.notifyName, address: config.notifyFrom };
  const returnPath = platformReturnPath(notifyDomain);
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let stopping = false;

  // Made (the first time for this domain) and opened once: the keys never change while the process runs. A failed
  // load is not kept: the next message tries again, and meanwhile nothing goes out unsigned.
  let loaded: Promise<{ published: PlatformKey[]; signing: SigningKey[] }> | null = null;
  function platformKeys() {
    loaded ??= ensurePlatformKeys(storage, notifyDomain, new Date(clock.now())).then((keys) => ({
      published: keys.map(({ privatePem: _, ...k }) => k),
      signing: keys.map((k) => ({ domain: k.domain, selector: k.selector, key: createPrivateKey(k.privatePem) })),
    }));
    loaded.catch(() => (loaded = null));
    return loaded;
  }

  async function deliver(n: ClaimedNotification) {
    const now = clock.now();
    const body = sealer.open(n.bodySealed, `notification_outbox:${n.id}`);
    // From is SVC_NOTIFY_FROM as configured now (a row queued before a change of it goes out as the new one: the
    // keys are the new domain's).
    const raw = RAW_KINDS.has(n.kind)
      ? withPlatformHeaders(Buffer.from(body, 'utf8'), from)
      : await composeMessage({
          from,
          to: n.recipient,
          subject: n.subject,
          text: body,
          messageId: `${randomUUID()}@${notifyDomain}`,
          date: new Date(now),
          headers: { 'Auto-Submitted': AUTO_SUBMITTED },
        });
    const message = await dkimSign(raw, (await platformKeys()).signing, now);
    const domain = n.recipient.slice(n.recipient.lastIndexOf('@') + 1).toLowerCase();
    const result = await pools.send(
      { domain, source: sourceAddressFor(config.sourceAddresses, config.notifyFrom) },
      returnPath,
      n.recipient,
      message,
    );
    if (result.kind === 'accepted') return notificationSent(db, n.id, new Date(clock.now()));
    const c = classify(result.kind === 'reply' ? result.reply : { connectionError: result.error });
    const why = result.kind === 'reply' ? result.reply.message : result.error;
    const next =
      c.action === 'fail'
        ? null
        : nextAttempt({
            attempts: n.attempts,
            firstAttemptMs: n.createdAt.getTime(),
            nowMs: clock.now(),
            delaysMs: config.retryDelaysMs,
          });
    await notificationFailed(db, n.id, `${c.class}: ${why}`, next?.action === 'retry' ? new Date(next.atMs) : null);
  }

  async function round() {
    const now = clock.now();
    const claimed = await claimNotifications(db, new Date(now), BATCH, new Date(now + LEASE_MS));
    await Promise.all(
      claimed.map((n) =>
        deliver(n).catch((err) =>
          log.error({ err, notificationId: n.id }, 'notification delivery failed; retried after its lease'),
        ),
      ),
    );
  }

  function tick() {
    timer = null;
    running = round()
      .catch((err) => log.error({ err }, 'notification poll failed'))
      .finally(() => {
        running = null;
        if (!stopping) timer = setTimeout(tick, pollMs);
      });
  }
  timer = setTimeout(tick, 0);

  // Eagerly, so that the first start of a deployment makes the keys `svc doctor --platform` shows.
  platformKeys().catch((err) => log.error({ err }, 'platform DKIM keys could not be made or opened'));

  return {
    /** The notify domain's platform keys as published (made first if missing). */
    async keys(): Promise<PlatformKey[]> {
      return (await platformKeys()).published;
    },
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
