// docs/api.md §4.15 the webmail's own JSON API. Its routes are unsigned (auth 'public' to the HMAC layer)
// and carry `webmail`: the app checks the Host (the webmail host, a verified custom domain or a local
// name), the session cookie of one inbox and, on every change, the session's CSRF token. The raw
// endpoints (the sandboxed HTML of a message, part downloads, the event stream) and the static app sit
// beside these, in control/webmail/, because they do not answer JSON.
import { Type } from '@sinclair/typebox';
import { MB, Nullable, Obj, Ok, Timestamp, routes } from './types.js';

export const WEBMAIL_CSRF_HEADER = 'x-csrf-token';

const Id = Type.String({ maxLength: 64 });
const AddressList = Type.Array(Type.String({ minLength: 1, maxLength: 320 }), { maxItems: 50 });

export const WebmailAddress = Type.Object({ name: Nullable(Type.String()), address: Type.String() });

export const WebmailFolder = Type.Object({
  id: Type.String(),
  name: Type.String(),
  /** RFC 6154 role without its backslash (sent, drafts, trash, junk), 'inbox' for INBOX, else null. */
  role: Nullable(Type.String()),
  total: Type.Integer(),
  unread: Type.Integer(),
});

export const WebmailListItem = Type.Object({
  id: Type.String(),
  folderId: Type.String(),
  subject: Type.String(),
  from: Type.Array(WebmailAddress),
  to: Type.Array(WebmailAddress),
  date: Timestamp,
  preview: Type.String(),
  seen: Type.Boolean(),
  flagged: Type.Boolean(),
  answered: Type.Boolean(),
  hasAttachments: Type.Boolean(),
  size: Type.Integer(),
});

export const WebmailAttachment = Type.Object({
  part: Type.String(),
  filename: Type.String(),
  contentType: Type.String(),
  size: Type.Integer(),
});

export const WebmailMessage = Type.Intersect([
  WebmailListItem,
  Type.Object({
    cc: Type.Array(WebmailAddress),
    replyTo: Type.Array(WebmailAddress),
    messageIdHeader: Nullable(Type.String()),
    references: Type.Array(Type.String()),
    text: Type.String(),
    hasHtml: Type.Boolean(),
    remoteImages: Type.Boolean(),
    attachments: Type.Array(WebmailAttachment),
  }),
]);

const OutgoingAttachment = Obj({
  filename: Type.String({ minLength: 1, maxLength: 255 }),
  contentType: Type.String({ maxLength: 255 }),
  contentBase64: Type.String({ maxLength: 34 * MB }),
});

const Draft = {
  to: AddressList,
  cc: Type.Optional(AddressList),
  subject: Type.String({ maxLength: 998 }),
  text: Type.String({ maxLength: 4 * MB }),
  attachments: Type.Optional(Type.Array(OutgoingAttachment, { maxItems: 20 })),
  /** Message-ID (without brackets) of the message answered, for In-Reply-To and References (RFC 5322 §3.6.4). */
  inReplyTo: Type.Optional(Type.String({ maxLength: 998 })),
  references: Type.Optional(Type.Array(Type.String({ maxLength: 998 }), { maxItems: 100 })),
  /** The draft this replaces; it is removed once the new copy is stored (or the message sent). */
  draftId: Type.Optional(Id),
  /** The message answered: marked \Answered once the reply is sent. */
  answering: Type.Optional(Id),
};

const session = { auth: 'public', webmail: 'session', audit: false } as const;

export const webmailRoutes = routes({
  'webmail.session.create': {
    method: 'POST',
    path: '/webmail/v1/session',
    auth: 'public',
    webmail: 'signin',
    audit: false,
    summary:
      'Sign in with the inbox address and password (the IMAP login: the first one clears the initial password and ' +
      'starts billing). Sets the HttpOnly session cookie; answers the CSRF token every change must send in ' +
      'X-CSRF-Token. 401 unauthorized on a wrong address or password, 429 rate_limited when throttled.',
    body: Obj({ address: Type.String({ minLength: 1, maxLength: 320 }), password: Type.String({ maxLength: 1024 }) }),
    response: Type.Object({ address: Type.String(), csrfToken: Type.String() }),
  },
  'webmail.session.get': {
    method: 'GET',
    path: '/webmail/v1/session',
    ...session,
    summary: 'The signed-in inbox, the CSRF token, and whether it can send (with why not).',
    response: Type.Object({
      address: Type.String(),
      csrfToken: Type.String(),
      canSend: Type.Boolean(),
      cannotSendReason: Nullable(Type.String()),
    }),
  },
  'webmail.session.delete': {
    method: 'DELETE',
    path: '/webmail/v1/session',
    ...session,
    summary: 'Sign out: the session ends and its cookie is cleared.',
    response: Ok,
  },
  'webmail.password.change': {
    method: 'POST',
    path: '/webmail/v1/password',
    ...session,
    summary:
      "Change the inbox's own password. Every other session of the inbox (IMAP too) ends; this one continues with " +
      'a new cookie and CSRF token. 401 when currentPassword is wrong.',
    body: Obj({
      currentPassword: Type.String({ maxLength: 1024 }),
      newPassword: Type.String({ minLength: 10, maxLength: 1024 }),
    }),
    response: Type.Object({ csrfToken: Type.String() }),
  },
  'webmail.folders.list': {
    method: 'GET',
    path: '/webmail/v1/folders',
    ...session,
    summary: 'The folders of the inbox with their message and unread counts, INBOX first.',
    response: Type.Object({ folders: Type.Array(WebmailFolder) }),
  },
  'webmail.folders.empty': {
    method: 'POST',
    path: '/webmail/v1/folders/{folderId}/empty',
    ...session,
    summary: 'Remove every message of the Trash or Junk folder for good. 409 conflict for any other folder.',
    params: Type.Object({ folderId: Id }),
    response: Type.Object({ removed: Type.Integer() }),
  },
  'webmail.folders.messages.list': {
    method: 'GET',
    path: '/webmail/v1/folders/{folderId}/messages',
    ...session,
    summary:
      'A page of the folder, newest first. `q` keeps messages whose subject, sender, recipients or preview contain ' +
      'it (case-insensitive).',
    params: Type.Object({ folderId: Id }),
    query: Obj({
      page: Type.Optional(Type.Integer({ minimum: 1, maximum: 100000 })),
      pageSize: Type.Optional(Type.Integer({ minimum: 1, maximum: 200 })),
      q: Type.Optional(Type.String({ maxLength: 200 })),
    }),
    response: Type.Object({
      messages: Type.Array(WebmailListItem),
      total: Type.Integer(),
      page: Type.Integer(),
      pageSize: Type.Integer(),
    }),
  },
  'webmail.messages.get': {
    method: 'GET',
    path: '/webmail/v1/messages/{messageId}',
    ...session,
    summary:
      'One message: headers, its text, whether it has HTML (read from /webmail/v1/messages/{messageId}/html in a ' +
      'sandboxed frame) and its attachments. Reading marks it \\Seen unless markSeen is false.',
    params: Type.Object({ messageId: Id }),
    query: Obj({ markSeen: Type.Optional(Type.Boolean()) }),
    response: WebmailMessage,
  },
  'webmail.messages.update': {
    method: 'PATCH',
    path: '/webmail/v1/messages/{messageId}',
    ...session,
    summary: 'Mark read or unread, flag or unflag.',
    params: Type.Object({ messageId: Id }),
    body: Obj({ seen: Type.Optional(Type.Boolean()), flagged: Type.Optional(Type.Boolean()) }),
    response: Type.Object({ seen: Type.Boolean(), flagged: Type.Boolean() }),
  },
  'webmail.messages.move': {
    method: 'POST',
    path: '/webmail/v1/messages/{messageId}/move',
    ...session,
    summary: 'Move the message to another folder of the inbox; answers its new id.',
    params: Type.Object({ messageId: Id }),
    body: Obj({ folderId: Id }),
    response: Type.Object({ id: Type.String(), folderId: Type.String() }),
  },
  'webmail.messages.delete': {
    method: 'DELETE',
    path: '/webmail/v1/messages/{messageId}',
    ...session,
    summary: 'Move the message to Trash; a message already in Trash is removed for good.',
    params: Type.Object({ messageId: Id }),
    response: Type.Object({ trashed: Type.Boolean() }),
  },
  'webmail.drafts.save': {
    method: 'POST',
    path: '/webmail/v1/drafts',
    ...session,
    bodyLimit: 48 * MB,
    summary: 'Store the message being written in Drafts (replacing draftId); answers the new draft id.',
    body: Obj(Draft),
    response: Type.Object({ draftId: Type.String() }),
  },
  'webmail.messages.send': {
    method: 'POST',
    path: '/webmail/v1/send',
    ...session,
    bodyLimit: 48 * MB,
    summary:
      "Send through the sendEmail pipeline from the inbox's address (one accepted message per recipient, each " +
      "counting against the organization's daily allowance), keep a copy in Sent and drop the draft. " +
      '422 sender_domain_not_verified when the inbox domain has no verified outbound capability in its project.',
    body: Obj(Draft),
    response: Type.Object({
      sent: Type.Array(Type.Object({ to: Type.String(), providerMessageId: Type.String(), status: Type.String() })),
      sentCopyId: Nullable(Type.String()),
    }),
  },
});
