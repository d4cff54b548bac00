// RFC 9562 §4: a UUID in its text form, 8-4-4-4-12 hex digits, either case. Ids of rows and messages are
// UUIDs; a string of any other shape names nothing (and must not reach a ::uuid cast in Postgres).
import { v7 } from 'uuid';

export const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const isUuid = (s: string): boolean => UUID_RE.test(s);

/**
 * A new id for what is written in time order and looked up by id: a message and its events. An RFC 9562 §5.7
 * UUIDv7: 48 bits of Unix time in milliseconds, then a counter that starts at a random value each millisecond and
 * counts up within it (§6.2, method 1), then random bits; so ids made one after another in a process sort in that
 * order. Why not random (v4): the spool keeps a message's body, index entry and lease in LMDB B-trees keyed by its
 * id, and Postgres the messages and message_events primary keys in B-tree indexes; ids in time order land on the
 * last leaf pages of each tree, where random ones dirty a page of each tree per message (docs/decisions.md #73).
 * Nothing is granted to whoever knows an id (the return path carries a MAC, #53), and the time it tells is the
 * message's created_at. uuid is pinned (package.json): test/mail/uuid.test.ts checks the layout and the order.
 */
export const timeOrderedUuid = (): string => v7();
