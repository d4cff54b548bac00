// Received HTML as the webmail shows it (docs/api.md §4.15): sanitized here, then served alone in a sandboxed
// frame under its own Content-Security-Policy (control/webmail/raw.ts), so that either guard holds if the
// other fails. No script, no forms, no frames, no event handlers; links kept but opened outside; images only
// from the message itself (cid:, RFC 2392, inlined as data: URLs) or data:, remote ones kept back until the
// reader asks for them.
//
// sanitize-html 2.18.1 (2.18 and later need Node 22.12; the service runs on the bundled Node 24, README).
import { createRequire } from 'node:module';
import type SanitizeHtml from 'sanitize-html';
import { depthGuard, HtmlTooDeep } from '../mail/html-nesting.js';
import { htmlText } from '../mail/html-text.js';
import { escapeHtml } from './template-render.js';

// Required at the first message shown, not at start: with postcss, what it adds to the modules every control
// process loads anyway is ~60 ms of every start.
const require = createRequire(import.meta.url);
let sanitizer: typeof SanitizeHtml | null = null;
const loadSanitizeHtml = () => (sanitizer ??= require('sanitize-html') as typeof SanitizeHtml);

/** cid: images larger than this are left out rather than inlined into the page. */
const MAX_INLINE_IMAGE = 5 * 1024 * 1024;

/**
 * Received HTML longer than this (in characters) is shown as its text: sanitizing costs ~0.35–0.5 s a megabyte (of
 * paragraphs, or of the smallest tags) on the event loop that serves every tenant, the message's view sanitizes it
 * twice (the JSON's remoteImages and the frame), and a sender chooses the size (up to SVC_MAX_MESSAGE_BYTES).
 * Gmail clips a message at 102 kB; a newsletter is some 100–300 kB.
 */
export const MAX_SHOWN_HTML = 1024 * 1024;

export interface HtmlView {
  html: string;
  /** Whether the message refers to remote images (which are blocked unless `images` was given). */
  remoteImages: boolean;
}

export interface InlineImage {
  contentType: string;
  bytes: Buffer;
}

const REMOTE = /^(https?:)?\/\//i;

/** Whether remote images are shown, and the message's own images by Content-ID (RFC 2392). */
export interface HtmlViewOptions {
  images: boolean;
  cid: (id: string) => InlineImage | null;
}

export function sanitizeMessageHtml(raw: string, opts: HtmlViewOptions): HtmlView {
  if (raw.length > MAX_SHOWN_HTML) return asText(raw, 'too large');
  try {
    return sanitized(raw, opts);
  } catch (e) {
    // Nested deeper than a browser would nest it (mail/html-nesting.ts): the parse stopped there.
    if (e instanceof HtmlTooDeep) return asText(raw, 'nested too deeply');
    throw e;
  }
}

/** The HTML's words in place of the HTML, with a line saying why (the frame's CSP allows inline style). */
function asText(raw: string, why: string): HtmlView {
  const note = `This message's HTML is ${why} to show; here is its text.`;
  const text = escapeHtml(htmlText(raw));
  return {
    html: `<p style="color:#555;font-style:italic">${note}</p><pre style="white-space:pre-wrap">${text}</pre>`,
    remoteImages: false,
  };
}

function sanitized(raw: string, opts: HtmlViewOptions): HtmlView {
  const depth = depthGuard();
  let remoteImages = false;
  const sanitizeHtml = loadSanitizeHtml();
  const html = sanitizeHtml(raw, {
    // Every element htmlparser2 opens and closes, implied ones included: its depth, which stops the parse past
    // MAX_HTML_DEPTH before its cost (depth squared) runs away.
    onOpenTag: depth.open,
    onCloseTag: depth.close,
    allowedTags: [
      ...sanitizeHtml.defaults.allowedTags,
      'img',
      'style',
      'center',
      'font',
      'span',
      'div',
      'table',
      'thead',
      'tbody',
      'tfoot',
      'tr',
      'td',
      'th',
      'colgroup',
      'col',
    ],
    // The frame's CSP allows inline style only; a <style> element's text cannot run anything there.
    allowVulnerableTags: true,
    allowedAttributes: {
      '*': ['style', 'class', 'align', 'valign', 'width', 'height', 'bgcolor', 'color', 'dir', 'lang', 'title'],
      a: ['href', 'name', 'target', 'rel'],
      img: ['src', 'alt', 'width', 'height', 'data-blocked-src'],
      td: ['colspan', 'rowspan'],
      th: ['colspan', 'rowspan'],
      font: ['face', 'size', 'color'],
    },
    allowedSchemes: ['http', 'https', 'mailto'],
    allowedSchemesByTag: { img: ['data', 'cid', 'http', 'https'] },
    allowProtocolRelative: false,
    transformTags: {
      a: (tagName, attribs) => ({
        tagName,
        attribs: { ...attribs, target: '_blank', rel: 'noopener noreferrer' },
      }),
      img: (tagName, attribs) => {
        const src = (attribs.src ?? '').trim();
        const out: Record<string, string> = { ...attribs };
        delete out.src;
        if (/^cid:/i.test(src)) {
          const image = opts.cid(decodeURIComponent(src.slice(4)));
          if (image && image.bytes.length <= MAX_INLINE_IMAGE && /^image\/[\w.+-]+$/.test(image.contentType)) {
            out.src = `data:${image.contentType};base64,${image.bytes.toString('base64')}`;
          }
        } else if (/^data:image\//i.test(src)) out.src = src;
        else if (REMOTE.test(src)) {
          remoteImages = true;
          if (opts.images && /^https?:/i.test(src)) out.src = src;
          else out['data-blocked-src'] = src.slice(0, 2048);
        }
        return { tagName, attribs: out };
      },
    },
  });
  return { html, remoteImages };
}

/**
 * What the message frame's sandbox allows (HTML sandboxing flags), in its CSP and on the <iframe> alike:
 * popups only, so that a link (target=_blank, rel=noopener noreferrer) opens in a tab of its own, outside the
 * sandbox; no scripts, no forms, no same-origin access, no top navigation.
 */
export const MESSAGE_FRAME_SANDBOX = 'allow-popups allow-popups-to-escape-sandbox';

/** The Content-Security-Policy of the message frame: sandboxed, nothing but inline style and the message's images. */
export function messageFrameCsp(images: boolean): string {
  const img = `img-src data: cid:${images ? ' https: http:' : ''}`;
  return `sandbox ${MESSAGE_FRAME_SANDBOX}; default-src 'none'; ${img}; style-src 'unsafe-inline'`;
}
