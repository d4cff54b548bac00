// Replaying an RFC's example exchange through a raw socket (test/imap/conformance/*.test.ts): each client
// line is sent as the RFC writes it, and each server line the RFC shows must come back.
import type { Test } from 'tap';
import type { RawImap } from '../../helpers/imap-inbox.js';

/** The RFC's server lines as patterns: <n> a number, <text> any text; the rest literal. */
function expected(line: string, flags = ''): RegExp {
  const escaped = line.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`^${escaped.replace(/<n>/g, '\\d+').replace(/<text>/g, '[^\\r\\n]*')}$`, flags);
}

/**
 * Two spellings the RFC's grammar allows and its example prints otherwise: addresses of one list follow each
 * other without a space (§9 `env-cc = "(" 1*address ")"`; the §8 text has one), and MIME type, subtype and
 * parameter names are case-insensitive (RFC 2045 §5.1; we send them lower-case, the example upper-case).
 */
const canonical = (line: string) => line.replace(/\) \(/g, ')(');

/** Sends `command` and checks that the server's answer holds the RFC's lines (untagged ones in any order). */
export async function exchange(t: Test, raw: RawImap, command: string, rfc: string[]): Promise<string[]> {
  const from = raw.text().length;
  const tag = command.split(' ')[0]!;
  raw.send(command);
  return answer(t, raw, from, tag, command, rfc);
}

/** Checks what the server said since `from` (up to `tag`'s status) against the RFC's lines. */
export async function answer(t: Test, raw: RawImap, from: number, tag: string, command: string, rfc: string[]) {
  await raw.until(new RegExp(`\\r\\n${tag} (OK|NO|BAD)[^\\r]*\\r\\n$|^${tag} `), `${tag}'s tagged answer`);
  // Literals are folded into their line, as the RFC prints them: `{n}` then the octets.
  const lines = raw.text().slice(from).replace(/\r\n$/, '').split('\r\n');
  if (process.env.REPLAY_DEBUG) process.stderr.write(`REPLAY ${command}\n${lines.join('\n')}\n`);
  const used = new Set<number>();
  for (const want of rfc) {
    const re = expected(canonical(want), /BODY \(/.test(want) ? 'i' : '');
    // Untagged data may come in any order (RFC 3501 §7); the tagged status ends the command (§2.2.2).
    const at = want.startsWith(`${tag} `)
      ? lines.length - 1
      : lines.findIndex((l, i) => !used.has(i) && re.test(canonical(l)));
    t.ok(at >= 0 && re.test(canonical(lines[at]!)), `C: ${command}  S: ${want}`);
    used.add(at);
  }
  return lines;
}
