// Delivers the platform's own mail (password resets, invitations) from the Postgres outbox through the
// same connection pools. Signed with the DKIM keys of SVC_NOTIFY_FROM's domain when the operator has
// registered and verified it as a sending domain; otherwise sent unsigned, with a warning at start
// (customer mail, by contrast, is never sent unsigned).
import { randomUUID } from 'node:crypto';
import type { Context } from '../../config/context.js';
import type { Storage } from '../../storage/index.js';
import { verifiedCapabilityOf } from '../../storage/pg/deliveries.js';
import {
  claimNotifications,
  notificationFailed,
  notificationSent,
  type ClaimedNotification,
} from '../../storage/pg/notification-outbox.js';
import { composeMessage } from '../../mail/compose.js';
import { dkimSign } from '../../mail/dkim-sign.js';
import { createKeyCache } from './signing-keys.js';
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
  const keys = createKeyCache(db, sealer, () => clock.now());
  const notifyDomain = config.notifyFrom.slice(config.notifyFrom.lastIndexOf('@') + 1).toLowerCase();
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<void> | null = null;
  let stopping = false;
  let warnedUnsigned = false;

  async function signingKeys() {
    const capId = await verifiedCapabilityOf(db, notifyDomain);
    if (capId) return keys.get(capId);
    if (!warnedUnsigned) {
      warnedUnsigned = true;
      log.warn(
        { notifyFrom: config.notifyFrom },
        'SVC_NOTIFY_FROM has no verified sending domain: platform mail goes out unsigned',
      );
    }
    return null;
  }

  async function deliver(n: ClaimedNotification) {
    const now = clock.now();
    const body = sealer.open(n.bodySealed, `notification_outbox:${n.id}`);
    const raw = RAW_KINDS.has(n.kind)
      ? Buffer.from(body, 'utf8')
      : await composeMessage({
          from: { name: null, address: n.sender },
          to: n.recipient,
          subject: n.subject,
          text: body,
          messageId: `${randomUUID()}@${notifyDomain}`,
          date: new Date(now),
        });
    const k = await signingKeys();
    const message = k ? dkimSign(raw, k, now) : raw;
    const domain = n.recipient.slice(n.recipient.lastIndexOf('@') + 1).toLowerCase();
    const result = await pools.send(
      { domain, source: sourceAddressFor(config.sourceAddresses, n.sender) },
      n.sender,
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

  return {
    async stop() {
      stopping = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
