// The webmail's non-JSON endpoints (docs/api.md §4.15), beside the route table because they answer a page, a
// file or an event stream: the app itself (at `/` on webmail hosts, at /webmail/ on any host that may reach
// it), its static files and the ES modules it imports (Preact and htm from node_modules, through an import
// map), a message's sanitized HTML for the sandboxed frame, part downloads, and the server-sent events that
// tell the page about new mail (fed by the change feed, storage/pg/change-feed.ts).
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { PassThrough } from 'node:stream';
import { fileURLToPath } from 'node:url';
import type { Context as KoaContext, Next } from 'koa';
import type { Deps } from '../deps.js';
import { fail } from '../errors.js';
import { gateWebmail, isWebmailHost, webmailReachable } from './gate.js';
import { decodedPart, messagePart, openMessage, webmailSession, type WebmailSession } from '../../core/webmail.js';
import { messageFrameCsp, sanitizeMessageHtml } from '../../core/webmail-html.js';
import { isInboxNotice } from '../../mail/mail-store.js';

const ROOT = new URL('../../', import.meta.url);
const APP_DIR = new URL('webmail/', ROOT);

/** The ES modules of the import map: only these files of node_modules are served. */
const VENDOR: Record<string, URL> = {
  'preact.mjs': new URL('node_modules/preact/dist/preact.mjs', ROOT),
  'hooks.mjs': new URL('node_modules/preact/hooks/dist/hooks.mjs', ROOT),
  'htm.mjs': new URL('node_modules/htm/dist/htm.module.js', ROOT),
};

const IMPORT_MAP = JSON.stringify({
  imports: {
    preact: '/webmail/vendor/preact.mjs',
    'preact/hooks': '/webmail/vendor/hooks.mjs',
    htm: '/webmail/vendor/htm.mjs',
  },
});
const IMPORT_MAP_HASH = createHash('sha256').update(IMPORT_MAP).digest('base64');

/** CSP3: the inline import map is allowed by its hash only; everything else comes from this origin. */
export const APP_CSP = [
  "default-src 'none'",
  `script-src 'self' 'sha256-${IMPORT_MAP_HASH}'`,
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-src 'self'",
  "form-action 'self'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
].join('; ');

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  mjs: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
};

const files = new Map<string, Buffer>();
async function cached(url: URL): Promise<Buffer> {
  const key = url.href;
  let b = files.get(key);
  if (!b) files.set(key, (b = await readFile(fileURLToPath(url))));
  return b;
}

function common(ctx: KoaContext) {
  ctx.set('X-Content-Type-Options', 'nosniff');
  ctx.set('Referrer-Policy', 'no-referrer');
}

async function appPage(ctx: KoaContext) {
  const html = (await cached(new URL('index.html', APP_DIR))).toString('utf8');
  common(ctx);
  ctx.set('Content-Security-Policy', APP_CSP);
  ctx.set('X-Frame-Options', 'DENY');
  ctx.set('Cache-Control', 'no-store');
  ctx.type = 'text/html; charset=utf-8';
  ctx.body = html.replace('<!--IMPORTMAP-->', `<script type="importmap">${IMPORT_MAP}</script>`);
}

async function staticFile(ctx: KoaContext, url: URL, name: string) {
  const ext = name.slice(name.lastIndexOf('.') + 1);
  common(ctx);
  ctx.set('Cache-Control', 'no-cache');
  ctx.type = TYPES[ext] ?? 'application/octet-stream';
  ctx.body = await cached(url);
}

/** RFC 6266 Content-Disposition: attachment with an ASCII fallback and the UTF-8 name (RFC 8187). */
function attachmentDisposition(filename: string): string {
  const ascii = filename.replace(/[^\x20-\x7e]|["\\]/g, '_');
  return `attachment; filename="${ascii}"; filename*=UTF-8''${encodeURIComponent(filename)}`;
}

async function messageHtml(ctx: KoaContext, deps: Deps, s: WebmailSession, id: string) {
  const images = ctx.query.images === '1';
  const m = await openMessage(deps, s, id);
  const view = sanitizeMessageHtml(m.html ?? '', {
    images,
    cid: (cid) => {
      const e = m.cids.get(cid);
      if (!e) return null;
      return {
        contentType: `${e.type}/${e.subtype}`,
        bytes: decodedPart(m.body, e),
      };
    },
  });
  common(ctx);
  ctx.set('Content-Security-Policy', messageFrameCsp(images));
  ctx.set('Cache-Control', 'no-store');
  ctx.type = 'text/html; charset=utf-8';
  const head = '<!doctype html><html><head><meta charset="utf-8"><base target="_blank"></head>';
  ctx.body = `${head}<body>${view.html}</body></html>`;
}

async function download(ctx: KoaContext, deps: Deps, s: WebmailSession, id: string, part: string) {
  const p = await messagePart(deps, s, id, part);
  common(ctx);
  ctx.set('Content-Disposition', attachmentDisposition(p.filename));
  ctx.set('Content-Security-Policy', "sandbox; default-src 'none'");
  ctx.set('Cache-Control', 'no-store');
  ctx.type = 'application/octet-stream';
  ctx.body = p.bytes;
}

/**
 * SSE (HTML Living Standard §9.2): `ready` once subscribed, `change` per committed change, `signout` when the
 * session ends.
 */
async function events(ctx: KoaContext, deps: Deps, s: WebmailSession, token: string) {
  const stream = new PassThrough();
  const send = (event: string, data: unknown) => stream.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  let unsubscribe: (() => void) | null = null;
  const ping = setInterval(() => stream.write(': ping\n\n'), 25_000);
  const end = () => {
    clearInterval(ping);
    unsubscribe?.();
    unsubscribe = null;
    stream.end();
  };
  ctx.req.on('close', end);
  unsubscribe = await deps.storage.mail.changes.subscribe({ inboxId: s.inboxId }, (n) => {
    if (!isInboxNotice(n)) {
      send('change', { folderId: n.mailboxId });
      return;
    }
    // A password change or deletion: the session ends if the credentials moved on.
    void webmailSession(deps, token, new Date(deps.ctx.clock.now())).then(
      (still) => {
        if (!still) {
          send('signout', {});
          end();
        }
      },
      () => {},
    );
  });
  ctx.req.socket.setTimeout(0);
  common(ctx);
  ctx.status = 200;
  ctx.set('Content-Type', 'text/event-stream; charset=utf-8');
  ctx.set('Cache-Control', 'no-store');
  ctx.set('X-Accel-Buffering', 'no');
  ctx.body = stream;
  stream.write('retry: 3000\n\n');
  send('ready', {});
}

const cookieToken = (ctx: KoaContext) =>
  (ctx.get('cookie') || '')
    .split(';')
    .map((p) => p.trim())
    .find((p) => p.startsWith('svc_webmail=') || p.startsWith('__Host-svc_webmail='))
    ?.split('=')[1] ?? '';

const MESSAGE_RAW = /^\/webmail\/v1\/messages\/([0-9a-fA-F-]{36})\/(html|parts\/([\d.]{1,40}))$/;

export function webmailPages(deps: Deps) {
  return async (ctx: KoaContext, next: Next) => {
    if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return next();
    const path = ctx.path;
    if (path === '/') {
      if (await isWebmailHost(deps, ctx.hostname)) return appPage(ctx);
      return next();
    }
    if (!path.startsWith('/webmail')) return next();
    if (path === '/webmail') {
      ctx.redirect('/webmail/');
      return;
    }
    if (path === '/webmail/') {
      if (!(await webmailReachable(deps, ctx.hostname))) return next();
      return appPage(ctx);
    }
    const asset = /^\/webmail\/assets\/([\w-]+\.(?:js|css|svg))$/.exec(path);
    if (asset) {
      if (!(await webmailReachable(deps, ctx.hostname))) return next();
      return staticFile(ctx, new URL(asset[1]!, APP_DIR), asset[1]!);
    }
    const vendor = /^\/webmail\/vendor\/([\w.-]+)$/.exec(path);
    if (vendor && VENDOR[vendor[1]!]) {
      if (!(await webmailReachable(deps, ctx.hostname))) return next();
      return staticFile(ctx, VENDOR[vendor[1]!]!, vendor[1]!);
    }
    const raw = MESSAGE_RAW.exec(path);
    if (raw) {
      const { session } = await gateWebmail(ctx, deps, 'session');
      if (raw[2] === 'html') return messageHtml(ctx, deps, session!, raw[1]!);
      return download(ctx, deps, session!, raw[1]!, raw[3]!);
    }
    if (path === '/webmail/v1/events') {
      const { session } = await gateWebmail(ctx, deps, 'session');
      return events(ctx, deps, session!, cookieToken(ctx));
    }
    if (path.startsWith('/webmail/v1/')) return next();
    throw fail('not_found', 'No such route.');
  };
}
