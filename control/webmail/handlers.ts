// docs/api.md §4.15 the webmail's JSON API: HTTP shapes around core/webmail.ts and core/webmail-send.ts. The app
// has already run the gate (control/webmail/gate.ts): rc.webmail holds the session of the route's inbox.
import type { webmailRoutes } from '@svc-mail/sdk';
import type { Handlers, RequestCtx } from '../deps.js';
import { clearedCookie, sessionCookie } from './gate.js';
import {
  changeWebmailPassword,
  deleteMessage,
  emptyFolder,
  moveMessage,
  openMessage,
  sendingState,
  setMessageFlags,
  webmailFolders,
  webmailListItem,
  webmailMessages,
  webmailSignIn,
  webmailSignOut,
  addFlag,
  type WebmailSession,
} from '../../core/webmail.js';
import { sanitizeMessageHtml } from '../../core/webmail-html.js';
import { saveDraft, sendFromWebmail } from '../../core/webmail-send.js';

function session(rc: RequestCtx): WebmailSession {
  const s = rc.webmail?.session;
  if (!s) throw new Error('a webmail route ran without its session');
  return s;
}

export const webmailHandlers: Handlers<typeof webmailRoutes> = {
  async 'webmail.session.create'({ body }, rc) {
    const out = await webmailSignIn(rc.deps, {
      address: body.address,
      password: body.password,
      ip: rc.ip,
      now: rc.now,
      passwordLogN: rc.deps.passwordLogN,
    });
    rc.headers['Set-Cookie'] = sessionCookie(out.token, rc.webmail?.secure ?? false);
    rc.headers['Cache-Control'] = 'no-store';
    return { address: out.address, csrfToken: out.csrfToken };
  },

  async 'webmail.session.get'(_in, rc) {
    const s = session(rc);
    const st = await sendingState(rc.deps, s);
    rc.headers['Cache-Control'] = 'no-store';
    return { address: s.address, csrfToken: s.csrfToken, canSend: st.canSend, cannotSendReason: st.reason };
  },

  async 'webmail.session.delete'(_in, rc) {
    await webmailSignOut(rc.deps, session(rc));
    rc.headers['Set-Cookie'] = clearedCookie(rc.webmail?.secure ?? false);
    return { ok: true as const };
  },

  async 'webmail.password.change'({ body }, rc) {
    const out = await changeWebmailPassword(rc.deps, session(rc), {
      ...body,
      now: rc.now,
      passwordLogN: rc.deps.passwordLogN,
    });
    rc.headers['Set-Cookie'] = sessionCookie(out.token, rc.webmail?.secure ?? false);
    return { csrfToken: out.csrfToken };
  },

  async 'webmail.folders.list'(_in, rc) {
    return { folders: await webmailFolders(rc.deps, session(rc)) };
  },

  async 'webmail.folders.empty'({ params }, rc) {
    return emptyFolder(rc.deps, session(rc), params.folderId);
  },

  async 'webmail.folders.messages.list'({ params, query }, rc) {
    return webmailMessages(rc.deps, session(rc), params.folderId, query);
  },

  async 'webmail.messages.get'({ params, query }, rc) {
    const s = session(rc);
    const m = await openMessage(rc.deps, s, params.messageId);
    if (query.markSeen !== false) await addFlag(rc.deps, m.message, '\\Seen');
    const seen = query.markSeen !== false || m.message.flags.includes('\\Seen');
    const remoteImages = m.html ? sanitizeMessageHtml(m.html, { images: false, cid: () => null }).remoteImages : false;
    const d = m.tree.display;
    const addr = (l: { name: string; address: string }[]) =>
      l.map((a) => ({ name: a.name || null, address: a.address }));
    return {
      ...webmailListItem({ ...m.message, flags: seen ? [...m.message.flags, '\\Seen'] : m.message.flags }, m.tree),
      seen,
      cc: addr(d.cc),
      replyTo: addr(d.replyTo),
      messageIdHeader: m.tree.messageId,
      references: referencesOf(m.body, m.tree.body.bodyStart),
      text: m.text,
      hasHtml: m.html !== null,
      remoteImages,
      attachments: m.attachments,
    };
  },

  async 'webmail.messages.update'({ params, body }, rc) {
    return setMessageFlags(rc.deps, session(rc), params.messageId, body);
  },

  async 'webmail.messages.move'({ params, body }, rc) {
    return moveMessage(rc.deps, session(rc), params.messageId, body.folderId, rc.now);
  },

  async 'webmail.messages.delete'({ params }, rc) {
    return deleteMessage(rc.deps, session(rc), params.messageId, rc.now);
  },

  async 'webmail.drafts.save'({ body }, rc) {
    return saveDraft(rc.deps, session(rc), body, rc.now);
  },

  async 'webmail.messages.send'({ body }, rc) {
    return sendFromWebmail(rc.deps, session(rc), body, rc.now);
  },
};

/** The message ids of the References field (RFC 5322 §3.6.4), for a reply's own References. */
function referencesOf(body: Buffer, headerEnd: number): string[] {
  const header = body
    .subarray(0, headerEnd)
    .toString('latin1')
    .replace(/\r?\n[ \t]+/g, ' ');
  const line = /^references:(.*)$/im.exec(header)?.[1] ?? '';
  // Each <…> once, then its id checked (id-left@id-right, no whitespace): `/<([^<>\s]+@[^<>\s]+)>/g` tried every
  // "@" of a run against the rest of it, quadratic in a header the sender chose (256 kB: 53 s; decisions #66).
  const ids: string[] = [];
  for (const [, id] of line.matchAll(/<([^<>]*)>/g)) {
    const at = id!.indexOf('@', 1);
    if (at > 0 && at < id!.length - 1 && !/\s/.test(id!)) ids.push(id!);
  }
  return ids.slice(-50);
}
