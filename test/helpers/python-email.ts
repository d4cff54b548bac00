// A message read back by an independent MIME parser: Python's standard `email` package (policy.default, which
// decodes RFC 2047 encoded words and RFC 2231 parameters), run by /usr/bin/python3.
//
//   const m = await parseWithPython(raw);
//   m.headers['reply-to']   // ['Ada <ada@example.test>'], decoded
//   m.parts                  // every leaf part, depth first, with its decoded bytes
import { execFile } from 'node:child_process';

const PYTHON = '/usr/bin/python3';

export interface ParsedPart {
  /** The MIME types of the containers from the root down to this part's parent, e.g. ['multipart/mixed']. */
  path: string[];
  contentType: string;
  /** `inline`, `attachment` or null. */
  disposition: string | null;
  /** The decoded file name (RFC 2231 or RFC 2047), or null. */
  filename: string | null;
  /** The Content-ID as written, angle brackets included, or null. */
  contentId: string | null;
  /** The part's content after its transfer encoding is undone. */
  content: Buffer;
}

export interface ParsedMessage {
  /** Header fields by lower-case name, decoded, in order; repeated fields repeat. */
  headers: Record<string, string[]>;
  /** The raw (undecoded) header field values by lower-case name, unfolded. */
  rawHeaders: Record<string, string[]>;
  contentType: string;
  parts: ParsedPart[];
  /** What the parser found wrong (email.errors defects), by part; empty for a well-formed message. */
  defects: string[];
}

const SCRIPT = String.raw`
import sys, json, base64, email
from email import policy
raw = base64.b64decode(sys.stdin.read())
msg = email.message_from_bytes(raw, policy=policy.default)
compat = email.message_from_bytes(raw, policy=policy.compat32)
headers, raw_headers, defects, parts = {}, {}, [], []
for k, v in msg.items():
    headers.setdefault(k.lower(), []).append(str(v))
for k, v in compat.items():
    raw_headers.setdefault(k.lower(), []).append(str(v).replace('\r\n', '').replace('\n', ''))
def walk(node, path):
    defects.extend('%s: %s' % (node.get_content_type(), type(d).__name__) for d in node.defects)
    if node.is_multipart():
        for child in node.iter_parts():
            walk(child, path + [node.get_content_type()])
        return
    parts.append({
        'path': path,
        'contentType': node.get_content_type(),
        'disposition': node.get_content_disposition(),
        'filename': node.get_filename(),
        'contentId': node.get('Content-ID'),
        'content': base64.b64encode(node.get_payload(decode=True) or b'').decode(),
    })
walk(msg, [])
print(json.dumps({'headers': headers, 'rawHeaders': raw_headers, 'contentType': msg.get_content_type(),
                  'parts': parts, 'defects': defects}))
`;

export function parseWithPython(raw: Buffer): Promise<ParsedMessage> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      PYTHON,
      ['-I', '-c', SCRIPT],
      { maxBuffer: 256 * 1024 * 1024, timeout: 60_000 },
      (err, stdout, stderr) => {
        if (err) return reject(new Error(`${PYTHON} email failed: ${stderr.trim() || err.message}`));
        try {
          const out = JSON.parse(stdout) as Omit<ParsedMessage, 'parts'> & {
            parts: (Omit<ParsedPart, 'content'> & { content: string })[];
          };
          resolve({ ...out, parts: out.parts.map((p) => ({ ...p, content: Buffer.from(p.content, 'base64') })) });
        } catch {
          reject(new Error(`${PYTHON} email: unreadable output: ${stdout.slice(0, 500)} ${stderr.slice(0, 500)}`));
        }
      },
    );
    child.stdin?.end(raw.toString('base64'));
  });
}
