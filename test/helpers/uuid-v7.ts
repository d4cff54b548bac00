// What a UUIDv7 looks like (RFC 9562 §5.7: version 7, variant 10), and the milliseconds in its first 48 bits:
// for the tests of the ids made by mail/uuid.ts's timeOrderedUuid (docs/decisions.md #73).
export const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

export const msOfUuidV7 = (id: string): number => parseInt(id.replace(/-/g, '').slice(0, 12), 16);
