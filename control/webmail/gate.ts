// Who may reach the webmail (docs/api.md §4.15): the Host decides whether this is a webmail host at all, the
// session cookie which inbox, and on every change the session's CSRF token. Used by the app for the route
// table's `webmail` routes and by the raw endpoints beside them.
import { timingSafeEqual, createHash } from 'node:crypto';
import { isIP } from 'node:net';
import type { Context as KoaContext } from 'koa';
import { WEBMAIL_CSRF_HEADER } from '@svc-mail/sdk';
import type { Deps } from '../deps.js';
import { fail } from '../errors.js';
import { isCustomDomainAllowed } from '../../core/custom-domains.js';
import { SESSION_IDLE_MS, webmailSession, type WebmailSession } from '../../core/webmail.js';

const COOKIE = 'svc_webmail';
/** RFC 6265bis §4.1.3.2: a __Host- cookie is Secure, has Path=/ and no Domain, so it stays with this host. */
const SECURE_COOKIE = `__Host-${COOKIE}`;

/** Host names the app is served at `/`: the webmail host and the verified custom domains. */
export async function isWebmailHost(deps: Deps, hostname: string): Promise<boolean> {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  if (!h) return false;
  if (h === deps.ctx.config.webmailHost) return true;
  return isCustomDomainAllowed(deps, h);
}

/**
 * Where /webmail/ and the webmail API answer: webmail hosts, and for local evaluation an IP literal, localhost
 * or the public URL's host. Any other name gets 404, so an unverified or deleted custom domain that still
 * points here gets no webmail.
 */
export async function webmailReachable(deps: Deps, hostname: string): Promise<boolean> {
  const h = hostname.toLowerCase().replace(/\.$/, '');
  if (isIP(h.replace(/^\[|\]$/g, '')) || h === 'localhost') return true;
  try {
    if (deps.publicUrl() && new URL(deps.publicUrl()).hostname.toLowerCase() === h) return true;
  } catch {
    // no usable public URL: only the names above
  }
  return isWebmailHost(deps, h);
}

/**
 * Secure cookies when the browser reached us over TLS: directly, or through a trusted proxy that says so
 * (SVC_TRUSTED_PROXIES; control/app.ts reads its X-Forwarded-Proto), or when the public URL is https.
 */
export function viaHttps(ctx: KoaContext, deps: Deps): boolean {
  return ctx.secure || ctx.state.forwardedProto === 'https' || deps.publicUrl().startsWith('https:');
}

export function sessionCookie(token: string, secure: boolean): string {
  const name = secure ? SECURE_COOKIE : COOKIE;
  const maxAge = SESSION_IDLE_MS / 1000;
  return `${name}=${token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAge}${secure ? '; Secure' : ''}`;
}

export function clearedCookie(secure: boolean): string {
  const name = secure ? SECURE_COOKIE : COOKIE;
  return `${name}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0${secure ? '; Secure' : ''}`;
}

function tokenOf(ctx: KoaContext): string | null {
  for (const part of (ctx.get('cookie') || '').split(';')) {
    const i = part.indexOf('=');
    const name = part.slice(0, i).trim();
    if (name === COOKIE || name === SECURE_COOKIE) return part.slice(i + 1).trim();
  }
  return null;
}

const same = (a: string, b: string) =>
  timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());

/** A change must come from a page of this very host: a cross-site Origin is refused outright. */
function sameOrigin(ctx: KoaContext): boolean {
  const origin = ctx.get('origin');
  if (!origin) return true;
  try {
    return new URL(origin).host.toLowerCase() === ctx.host.toLowerCase();
  } catch {
    return false;
  }
}

export interface WebmailGate {
  session: WebmailSession | null;
  secure: boolean;
}

/**
 * The checks of one webmail request: 404 off webmail hosts; for 'session', 401 without a live session and 403
 * when a change lacks the session's CSRF token or comes from another origin; for 'signin', 403 from another
 * origin or without a JSON body (which a cross-site form cannot send).
 */
export async function gateWebmail(ctx: KoaContext, deps: Deps, kind: 'session' | 'signin'): Promise<WebmailGate> {
  if (!(await webmailReachable(deps, ctx.hostname))) throw fail('not_found', 'No such route.');
  const secure = viaHttps(ctx, deps);
  const changes = !['GET', 'HEAD'].includes(ctx.method);
  if (changes && !sameOrigin(ctx)) throw fail('forbidden', 'Cross-site request refused.');
  if (kind === 'signin') {
    if (!ctx.is('application/json')) throw fail('forbidden', 'Sign in with a JSON body.');
    return { session: null, secure };
  }
  const token = tokenOf(ctx);
  const session = token ? await webmailSession(deps, token, new Date(deps.ctx.clock.now())) : null;
  if (!session) throw fail('unauthorized', 'Not signed in, or the session ended.');
  if (changes) {
    const given = ctx.get(WEBMAIL_CSRF_HEADER);
    if (!given || !same(given, session.csrfToken)) throw fail('forbidden', 'Missing or wrong CSRF token.');
  }
  return { session, secure };
}
