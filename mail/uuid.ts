// RFC 9562 §4: a UUID in its text form, 8-4-4-4-12 hex digits, either case. Ids of rows and messages are
// UUIDs; a string of any other shape names nothing (and must not reach a ::uuid cast in Postgres).
export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (s: string): boolean => UUID_RE.test(s);
