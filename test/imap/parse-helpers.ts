// Shared by the imap parser tests: wire text through the real reader into the parser.
import { CommandReader, type RawCommand } from '../../imap/reader.js';
import { CommandError, parseCommand } from '../../imap/parser.js';
import type { TaggedCommand } from '../../imap/command-types.js';

/** The one command `wire` holds (a final CRLF added), as the reader hands it over. */
export function readRaw(wire: string | Buffer): RawCommand {
  let bytes = typeof wire === 'string' ? Buffer.from(wire, 'utf8') : wire;
  bytes = Buffer.concat([bytes, Buffer.from('\r\n')]);
  const reader = new CommandReader();
  reader.push(bytes);
  for (let e = reader.next(); e; e = reader.next()) if (e.kind === 'command') return e.command;
  throw new Error(`no command in ${JSON.stringify(wire)}`);
}

export function parse(wire: string | Buffer): TaggedCommand {
  return parseCommand(readRaw(wire));
}

/** The error a command that does not parse gives: its tag, status, code and message. */
export function parseFailure(wire: string | Buffer): CommandError {
  try {
    parseCommand(readRaw(wire));
  } catch (err) {
    if (err instanceof CommandError) return err;
    throw err;
  }
  throw new Error(`${JSON.stringify(wire)} parsed`);
}
