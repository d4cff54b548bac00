// @ts-check
// The webmail's own JSON API (docs/api.md §4.15): same origin, the session in an HttpOnly cookie, the CSRF
// token on every change, the error envelope turned into an ApiError.

export class ApiError extends Error {
  /** @param {number} status @param {string} code @param {string} message */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

let csrf = '';
/** @param {string} token */
export function setCsrf(token) {
  csrf = token;
}

/**
 * @param {string} method
 * @param {string} path
 * @param {unknown} [body]
 * @returns {Promise<any>}
 */
export async function api(method, path, body) {
  /** @type {Record<string, string>} */
  const headers = { accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  if (method !== 'GET') headers['x-csrf-token'] = csrf;
  const res = await fetch(`/webmail/v1${path}`, {
    method,
    headers,
    credentials: 'same-origin',
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  /** @type {any} */
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok)
    throw new ApiError(res.status, json?.error?.code ?? 'http_error', json?.error?.message ?? `HTTP ${res.status}`);
  return json;
}

/**
 * A file or a downloaded part as an attachment of the draft API (base64 of its bytes).
 * @param {Blob} blob @param {string} filename @param {string} contentType
 * @returns {Promise<{ filename: string, contentType: string, contentBase64: string }>}
 */
function encodeAttachment(blob, filename, contentType) {
  return new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onerror = () => reject(r.error);
    r.onload = () => {
      const url = String(r.result);
      resolve({ filename, contentType, contentBase64: url.slice(url.indexOf(',') + 1) });
    };
    r.readAsDataURL(blob);
  });
}

/** @param {File} file */
export function readAttachment(file) {
  return encodeAttachment(file, file.name, file.type || 'application/octet-stream');
}

/**
 * An attachment of a stored message (a draft being opened again), read back through its download URL, so that
 * saving or sending the draft keeps it.
 * @param {string} messageId @param {{ part: string, filename: string, contentType: string }} a
 */
export async function readStoredAttachment(messageId, a) {
  const res = await fetch(`/webmail/v1/messages/${messageId}/parts/${a.part}`, { credentials: 'same-origin' });
  if (!res.ok) throw new ApiError(res.status, 'http_error', `The attachment ${a.filename} could not be read.`);
  return encodeAttachment(await res.blob(), a.filename, a.contentType || 'application/octet-stream');
}
