// docs/api.md §4.11 sendEmail, and the test messages of §4.10 and §4.14 that go through the same pipeline.
import { Type } from '@sinclair/typebox';
import { MB, Obj, routes } from './types.js';
import { PROJECT_AUTH } from './projects.js';
import { ADMIN_AUTH } from './admin.js';
import { TemplateValues } from './templates.js';
import { Metadata, Tag } from './mail-records.js';

/** docs/api.md §4.11: how far ahead scheduledAt may be. */
export const MAX_SCHEDULE_DAYS = 30;
/** docs/api.md §4.11: recipients given in to, cc and bcc together. */
export const MAX_RECIPIENTS = 50;
/** docs/api.md §4.11 limits of the extra fields. */
export const MAX_REPLY_TO = 50;
export const MAX_EXTRA_HEADERS = 50;
/** All extra header names and values together, in UTF-8 octets. */
export const MAX_EXTRA_HEADER_BYTES = 8 * 1024;
export const MAX_ATTACHMENTS = 50;
export const MAX_TAGS = 10;
/** The metadata object as JSON, in UTF-8 octets. */
export const MAX_METADATA_BYTES = 2 * 1024;

const ReplyToAddress = Type.String({ minLength: 3, maxLength: 500 });

const Attachment = Obj({
  filename: Type.String({ minLength: 1, maxLength: 255 }),
  /** The file's bytes, base64 (RFC 4648 §4, padded; no line breaks). */
  content: Type.String(),
  /** type/subtype without parameters; guessed from the file name's extension when absent. */
  contentType: Type.Optional(Type.String({ minLength: 3, maxLength: 255 })),
  /** Makes the part inline (multipart/related): the html refers to it as cid:<contentId>. */
  contentId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
});

// docs/api.md §4.11 recipients: `addr@domain` or `Name <addr@domain>`; one, or an array of them.
const RecipientAddress = Type.String({ minLength: 3, maxLength: 500 });
const RecipientList = (minItems: number) =>
  Type.Union([RecipientAddress, Type.Array(RecipientAddress, { minItems, maxItems: MAX_RECIPIENTS })]);

const fields = {
  // At least one `to`; at most MAX_RECIPIENTS in to, cc and bcc together (core/send-recipients.ts). Bcc
  // recipients get the message but appear in no header.
  to: RecipientList(1),
  cc: Type.Optional(RecipientList(0)),
  bcc: Type.Optional(RecipientList(0)),
  from: Type.String({ minLength: 3, maxLength: 500 }),
  // Required, also with a template (docs/api.md §4.11).
  subject: Type.String({ minLength: 1, maxLength: 998 }),
  text: Type.Optional(Type.String()),
  html: Type.Optional(Type.String()),
  idempotencyKey: Type.Optional(Type.String({ minLength: 8, maxLength: 128 })),
  // docs/api.md §4.11: the template's html and text replace the message's own (modules/templates, §4.13).
  templateId: Type.Optional(Type.String({ maxLength: 64 })),
  // Values of the {{name}} placeholders: strings, numbers, booleans, or null for "not given".
  variables: Type.Optional(TemplateValues),
  // One-click unsubscribe (RFC 8058): an https URL; the message gets List-Unsubscribe and
  // List-Unsubscribe-Post, both covered by the DKIM signature.
  unsubscribeUrl: Type.Optional(Type.String({ minLength: 9, maxLength: 900 })),
  // docs/api.md §4.11 extra fields. Their finer rules (address syntax, header names, reserved fields, base64,
  // sizes) are core/send.ts's, so that each refusal names the field it is about.
  // Reply-To (RFC 5322 §3.6.2): one address or several, bare or in the display-name form.
  replyTo: Type.Optional(
    Type.Union([ReplyToAddress, Type.Array(ReplyToAddress, { minItems: 1, maxItems: MAX_REPLY_TO })]),
  ),
  // Extra header fields, name → value (RFC 5322 §3.6.8 optional fields).
  headers: Type.Optional(Type.Record(Type.String(), Type.String(), { maxProperties: MAX_EXTRA_HEADERS })),
  attachments: Type.Optional(Type.Array(Attachment, { maxItems: MAX_ATTACHMENTS })),
  // Stored with the message, returned by its reads and carried in every webhook payload.
  tags: Type.Optional(Type.Array(Tag, { maxItems: MAX_TAGS })),
  metadata: Type.Optional(Metadata),
  // docs/api.md §4.11: an ISO 8601 time with its offset, in the future and at most MAX_SCHEDULE_DAYS ahead; the
  // message is queued (durable) at once and leaves no earlier.
  scheduledAt: Type.Optional(Type.String({ minLength: 10, maxLength: 40 })),
};
export const SendBody = Obj(fields);

/** docs/api.md §4.11 sendBatch: messages per call. */
export const MAX_BATCH = 100;
const { idempotencyKey: _itemKey, ...batchItemFields } = fields;
/** A message of a batch: a sendEmail body without its own idempotencyKey (the batch's covers it). */
export const BatchItem = Obj(batchItemFields);
export const SendBatchBody = Obj({
  messages: Type.Array(BatchItem, { minItems: 1, maxItems: MAX_BATCH }),
  idempotencyKey: Type.Optional(Type.String({ minLength: 8, maxLength: 128 })),
});

export const SendResult = Type.Object({
  providerMessageId: Type.String(),
  status: Type.Union([Type.Literal('queued'), Type.Literal('suppressed')]),
});

/** Spec task issue 2: 10 MB for sendEmail (and import), 1 MB elsewhere. */
const SEND_LIMIT = 10 * MB;

/**
 * docs/api.md §7: a templateId the project cannot use (404), a key reused with another body, a sender domain not
 * verified, the daily cap of `free`.
 */
const SEND_ERRORS = ['not_found', 'idempotency_key_reused', 'sender_domain_not_verified', 'quota_exceeded'] as const;

export const sendRoutes = routes({
  'v1.services.sendEmail': {
    method: 'POST',
    path: '/v1/services/sendEmail',
    // A project key with messages:send; the platform key sends on behalf of the project that owns
    // the verified outbound capability of the `from` domain. Organization tokens never send.
    auth: ['project_api_key', 'platform_admin'],
    scope: 'messages:send',
    bodyLimit: SEND_LIMIT,
    // The message and its events are the record of a send; an audit row per message would double
    // the hot path's writes.
    audit: false,
    summary: 'Queue a message; answered only once it is durable. 422 sender_domain_not_verified, 429 quota_exceeded.',
    errors: SEND_ERRORS,
    body: SendBody,
    response: SendResult,
  },
  'v1.services.sendBatch': {
    method: 'POST',
    path: '/v1/services/sendBatch',
    auth: ['project_api_key', 'platform_admin'],
    scope: 'messages:send',
    bodyLimit: SEND_LIMIT,
    audit: false,
    summary:
      'Queue 1 to 100 messages at once, all or none: any invalid item is a 400 naming it (body.messages[i].field) ' +
      'and nothing is queued. Answers a result per message, in order, once all are durable.',
    errors: SEND_ERRORS,
    body: SendBatchBody,
    response: Type.Object({ data: Type.Array(SendResult) }),
  },
  'console.projects.testMessage': {
    method: 'POST',
    path: '/console/v1/projects/{id}/test-message',
    auth: PROJECT_AUTH,
    target: { kind: 'project', in: 'params', field: 'id' },
    scope: 'project:admin',
    permission: 'projects:manage',
    bodyLimit: SEND_LIMIT,
    summary: "Send a test message from the project's verified sender domain through the sendEmail pipeline.",
    errors: SEND_ERRORS,
    params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
    body: SendBody,
    response: SendResult,
  },
  'admin.testMessage': {
    method: 'POST',
    path: '/admin/v1/test-message',
    auth: ADMIN_AUTH,
    bodyLimit: SEND_LIMIT,
    summary: 'Send a test message on behalf of a project, through the sendEmail pipeline.',
    errors: SEND_ERRORS,
    body: Obj({ ...fields, projectId: Type.String({ maxLength: 64 }) }),
    response: SendResult,
  },
});
