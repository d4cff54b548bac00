// The caught-mail pages of `svc dev` (docs/development.md), on a small HTTP listener of their own: the control
// plane stays as in production, and the pages only read the files the sink wrote. GET /dev/messages lists
// them (newest first; /dev/messages.json the same as JSON), /dev/messages/<id> shows one (headers, the HTML
// part rendered in a sandboxed iframe, the text part, the raw source), /dev/messages/<id>/raw its bytes.
// Everything from a message is escaped; the HTML part runs in an iframe with an empty sandbox (no scripts,
// an opaque origin) under a CSP that loads nothing from the network (no tracking pixels, no remote CSS).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodeCharset, paramText } from '../mail/mime-header.js';
import { parseMimeTree, transferDecode, type MimeEntity } from '../mail/mime-tree.js';
import { listCaught, readCaught, type CaughtMessage } from './sink.js';

export interface Pages {
  port: number;
  close(): Promise<void>;
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Escapes text for HTML content and quoted attribute values alike. */
export const esc = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

const CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'; base-uri 'none'";

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title>
<style>body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;width:100%}
td,th{text-align:left;padding:.3em .6em;border-bottom:1px solid #ddd;vertical-align:top}
pre{white-space:pre-wrap;word-break:break-all;background:#f6f6f6;padding:1em}
iframe{width:100%;height:30em;border:1px solid #ccc}dt{font-weight:bold}</style></head>
<body>${body}</body></html>`;
}

function listPage(messages: CaughtMessage[]): string {
  const rows = messages
    .map(
      (m) =>
        `<tr><td><a href="/dev/messages/${esc(m.id)}">${esc(m.id)}</a></td><td>${esc(m.receivedAt)}</td>` +
        `<td>${esc(m.from)}</td><td>${esc(m.rcptTo.join(', '))}</td><td>${esc(m.subject)}</td></tr>`,
    )
    .join('\n');
  return page(
    'Caught mail',
    `<h1>Caught mail</h1><p>Every message the MTA delivered in development mode, newest first. Nothing was sent.</p>
<table><thead><tr><th>id</th><th>time</th><th>from</th><th>to</th><th>subject</th></tr></thead>
<tbody>${rows || '<tr><td colspan="5">No message yet.</td></tr>'}</tbody></table>`,
  );
}

/** The first part of this type that is not an attachment, depth first. */
function firstPart(e: MimeEntity, subtype: 'html' | 'plain'): MimeEntity | null {
  if (e.children) {
    for (const c of e.children) {
      const found = firstPart(c, subtype);
      if (found) return found;
    }
    return null;
  }
  if (e.type !== 'text' || e.subtype !== subtype || e.disposition?.type === 'attachment') return null;
  return e;
}

function partText(raw: Buffer, e: MimeEntity | null): string | null {
  if (!e) return null;
  const bytes = transferDecode(raw.subarray(e.bodyStart, e.bodyEnd), e.encoding);
  return decodeCharset(bytes, paramText(e.params, 'charset'));
}

function messagePage(meta: CaughtMessage, raw: Buffer): string {
  const tree = parseMimeTree(raw);
  const html = partText(raw, firstPart(tree.body, 'html'));
  const text = partText(raw, firstPart(tree.body, 'plain'));
  const field = (name: string, value: string) => `<dt>${esc(name)}</dt><dd>${esc(value)}</dd>`;
  return page(
    meta.subject || '(no subject)',
    `<p><a href="/dev/messages">← all caught mail</a> · <a href="/dev/messages/${esc(meta.id)}/raw">raw</a></p>
<h1>${esc(meta.subject || '(no subject)')}</h1>
<dl>${field('From', meta.from)}${field('To', meta.to)}${field('Envelope from', meta.mailFrom)}` +
      `${field('Envelope to', meta.rcptTo.join(', '))}${field('Caught at', meta.receivedAt)}` +
      `${field('Size', `${meta.size} bytes`)}</dl>
${html === null ? '' : `<h2>HTML</h2><iframe sandbox="" title="HTML part" srcdoc="${esc(html)}"></iframe>`}
${text === null ? '' : `<h2>Text</h2><pre>${esc(text)}</pre>`}
<h2>Raw</h2><pre>${esc(raw.toString('utf8'))}</pre>`,
  );
}

export async function listenPages(opts: { dir: string; host: string; port: number }): Promise<Pages> {
  const send = (res: http.ServerResponse, status: number, type: string, body: string | Buffer) =>
    res
      .writeHead(status, {
        'Content-Type': type,
        'Content-Security-Policy': CSP,
        'X-Content-Type-Options': 'nosniff',
        'Referrer-Policy': 'no-referrer',
        'Cache-Control': 'no-store',
      })
      .end(body);
  const notFound = (res: http.ServerResponse) => send(res, 404, 'text/plain; charset=utf-8', 'Not found\n');

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    const url = new URL(req.url ?? '/', 'http://dev.localhost');
    if (req.method !== 'GET' && req.method !== 'HEAD') return notFound(res);
    if (url.pathname === '/') return res.writeHead(302, { Location: '/dev/messages' }).end();
    if (url.pathname === '/dev/messages')
      return send(res, 200, 'text/html; charset=utf-8', listPage(await listCaught(opts.dir)));
    if (url.pathname === '/dev/messages.json')
      return send(res, 200, 'application/json', JSON.stringify({ messages: await listCaught(opts.dir) }, null, 2));
    const m = /^\/dev\/messages\/([^/]+)(\/raw)?$/.exec(url.pathname);
    const found = m ? await readCaught(opts.dir, m[1]!) : null;
    if (!m || !found) return notFound(res);
    if (m[2]) return send(res, 200, 'text/plain; charset=utf-8', found.raw);
    return send(res, 200, 'text/html; charset=utf-8', messagePage(found.meta, found.raw));
  };
  const server = http.createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) send(res, 500, 'text/plain; charset=utf-8', 'Internal error\n');
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
