// Accounts (docs/api.md §4.2): sign-up, log-in and the password's life (forgot, reset, change). Each
// session is an account token; a password reset ends them all (docs/decisions.md #14). `passwordLogN` is the
// scrypt cost of new hashes (LOG_N in production, lower in tests).
import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { ApiError, fail } from './errors.js';
import type { CoreDeps } from './deps.js';
import { hashPassword, unusableHash, verifyPassword } from './passwords.js';
import { mintAccountToken } from './tokens.js';
import { queueNotification } from './notify.js';
import {
  findUserWithHash,
  findUserWithHashByEmail,
  insertUser,
  setPasswordHash,
  type User,
} from '../storage/pg/users.js';
import { revokeAllTokens } from '../storage/pg/tokens.js';
import {
  consumePasswordReset,
  insertPasswordReset,
  livePasswordReset,
  retirePasswordResets,
} from '../storage/pg/password-resets.js';
import { returnThrottles, takeThrottle, takeThrottles, type Throttle } from '../storage/pg/throttles.js';
import { clientKey } from '../mail/client-address.js';

/** docs/api.md §8: a reset link is valid for one hour. */
export const RESET_TTL_MS = 60 * 60_000;

const hashToken = (token: string) => createHash('sha256').update(token).digest('hex');

/**
 * docs/decisions.md #24, the throttles of the public routes. Failed logins per account and per client address
 * (a success spends nothing); sign-ups and `forgot` calls per client address; reset mails per account (over
 * it, `forgot` still answers `{ ok: true }` and sends nothing, so the answer tells nothing about the account
 * and nobody can mail-bomb an address from our sender). Accounts are keyed by the email in lower case, client
 * addresses as the MX counts them (an IPv4 address, an IPv6 /64: mail/client-address.ts clientKey).
 */
export const THROTTLES = {
  loginAccount: { burst: 10, perSecond: 1 / 30 },
  loginClient: { burst: 60, perSecond: 1 },
  signupClient: { burst: 100, perSecond: 1 / 10 },
  forgotClient: { burst: 30, perSecond: 1 / 10 },
  resetMail: { burst: 3, perSecond: 3 / 3600 },
} as const;

const accountKey = (email: string) => email.trim().toLowerCase();
const throttle = (key: string, t: { burst: number; perSecond: number }): Throttle => ({ key, ...t });

/** 429 rate_limited with Retry-After (docs/api.md §7). */
function throttled(seconds: number, what: string): ApiError {
  return new ApiError(
    'rate_limited',
    `${what}; try again in ${seconds} s.`,
    { retryAfterSeconds: seconds },
    { 'Retry-After': String(seconds) },
  );
}

/** A user with a fresh account token (its secret shown this once). */
export interface Session {
  user: User;
  token: { tokenId: string; secret: string };
}

/** A new customer account and its first token, in one transaction; 409 for an email in use. */
export async function signUp(
  deps: CoreDeps,
  a: { email: string; password: string; passwordLogN: number; now: Date; ip: string },
): Promise<Session> {
  const { db, sealer } = deps.storage;
  // Before the hash: each costs a memory-hard scrypt.
  const wait = await takeThrottle(db, throttle(`signup-ip:${clientKey(a.ip)}`, THROTTLES.signupClient), a.now);
  if (wait) throw throttled(wait, 'Too many sign-ups from your address');
  const passwordHash = await hashPassword(a.password, a.passwordLogN);
  return db.tx(async (q) => {
    const user = await insertUser(q, {
      id: randomUUID(),
      email: a.email.trim(),
      passwordHash,
      role: 'customer',
      now: a.now,
    });
    if (!user) throw fail('conflict', 'An account with this email already exists.');
    const token = await mintAccountToken(q, sealer, { userId: user.id, label: 'signup', now: a.now });
    return { user, token: { tokenId: token.tokenId, secret: token.secret } };
  });
}

/** A new account token for the right email and password; the same 401 for either being wrong. */
export async function logIn(
  deps: CoreDeps,
  a: { email: string; password: string; passwordLogN: number; now: Date; ip: string },
): Promise<Session> {
  const { db, sealer } = deps.storage;
  const buckets = [
    throttle(`login:${accountKey(a.email)}`, THROTTLES.loginAccount),
    throttle(`login-ip:${clientKey(a.ip)}`, THROTTLES.loginClient),
  ];
  // Taken before the password is checked (a throttled guess costs no scrypt, and concurrent guesses cannot all
  // pass on one token), given back on success: only failures spend.
  const wait = await takeThrottles(db, buckets, a.now);
  if (wait) throw throttled(wait, 'Too many failed logins');
  const found = await findUserWithHashByEmail(db, a.email.trim());
  // Verify against a dummy hash when there is no such user, so timing does not tell.
  const ok = await verifyPassword(a.password, found?.password_hash ?? unusableHash(a.passwordLogN));
  if (!found || !ok) throw fail('unauthorized', 'Email or password is wrong.');
  await returnThrottles(db, buckets, a.now);
  const { password_hash: _, ...user } = found;
  const token = await mintAccountToken(db, sealer, { userId: user.id, label: 'login', now: a.now });
  return { user, token: { tokenId: token.tokenId, secret: token.secret } };
}

/**
 * Mails a one-time reset link (through the notification outbox, in the transaction that records it) when
 * the email has an account; says nothing either way. `linkOf` makes the link of a token.
 */
export async function requestPasswordReset(
  deps: CoreDeps,
  r: { email: string; linkOf: (token: string) => string; now: Date; ip: string },
): Promise<void> {
  const { db } = deps.storage;
  const wait = await takeThrottle(db, throttle(`forgot-ip:${clientKey(r.ip)}`, THROTTLES.forgotClient), r.now);
  if (wait) throw throttled(wait, 'Too many password reset requests from your address');
  const user = await findUserWithHashByEmail(db, r.email.trim());
  if (!user) return;
  // The account's reset mails: over the bucket nothing is sent, and the answer stays the same.
  if (await takeThrottle(db, throttle(`reset-mail:${accountKey(user.email)}`, THROTTLES.resetMail), r.now)) return;
  const token = randomBytes(32).toString('base64url');
  const link = r.linkOf(token);
  await db.tx(async (q) => {
    await insertPasswordReset(q, {
      id: randomUUID(),
      userId: user.id,
      tokenHash: hashToken(token),
      now: r.now,
      expiresAt: new Date(r.now.getTime() + RESET_TTL_MS),
    });
    await queueNotification(q, deps, {
      kind: 'password_reset',
      to: user.email,
      now: r.now,
      subject: 'Reset your password',
      text:
        `Someone asked to reset the password of the account ${user.email}.\n\n` +
        `To choose a new password, open this link within one hour (it works once):\n\n${link}\n\n` +
        `If it was not you, ignore this message: your password stays as it is.\n`,
    });
  });
}

const invalidResetLink = () => fail('unauthorized', 'The reset link is invalid, expired or already used.');

/** Sets the password named by a live reset token, retires the user's other links and ends its sessions. */
export async function resetPassword(
  deps: CoreDeps,
  r: { token: string; password: string; passwordLogN: number; now: Date },
): Promise<void> {
  // A token that cannot work costs no scrypt (anyone may call this); it is consumed below, race-free.
  if (!(await livePasswordReset(deps.storage.db, hashToken(r.token), r.now))) throw invalidResetLink();
  const passwordHash = await hashPassword(r.password, r.passwordLogN);
  await deps.storage.db.tx(async (q) => {
    const userId = await consumePasswordReset(q, hashToken(r.token), r.now);
    if (!userId) throw invalidResetLink();
    await setPasswordHash(q, userId, passwordHash, r.now);
    await retirePasswordResets(q, userId, r.now);
    // docs/decisions.md #14: the user's sessions are its account tokens.
    await revokeAllTokens(q, 'account', userId, r.now);
  });
}

/** Changes a user's password given the current one (401 when it is wrong). */
export async function changePassword(
  deps: CoreDeps,
  c: { userId: string; currentPassword: string; newPassword: string; passwordLogN: number; now: Date },
): Promise<void> {
  const { db } = deps.storage;
  const user = await findUserWithHash(db, c.userId);
  if (!user || !(await verifyPassword(c.currentPassword, user.password_hash))) {
    throw fail('unauthorized', 'The current password is wrong.');
  }
  await setPasswordHash(db, c.userId, await hashPassword(c.newPassword, c.passwordLogN), c.now);
}
