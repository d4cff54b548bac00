// The MIME parts of a received message, flattened, with their bodies decoded: what DSN and ARF
// processing needs. mailsplit (the design card's splitter) does the parsing, including messages
// embedded as message/rfc822, which it descends into.
import { Readable } from 'node:stream';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { Splitter } = require('@zone-eu/mailsplit') as {
  Splitter: new (o?: { maxHeadSize?: number }) => NodeJS.ReadWriteStream;
};

interface SplitNode {
  type: 'node';
  root: boolean;
  contentType: string | false;
  multipart: string | false;
  parentNode: SplitNode | false;
  headers: { getFirst(key: string): string; getList(): { key: string; line: string }[] };
  getHeaders(): Buffer;
  getDecoder(): NodeJS.ReadWriteStream;
}

export interface Part {
  /** Lower case, e.g. 'message/delivery-status'; 'text/plain' when absent (RFC 2045 §5.2). */
  contentType: string;
  /** The part's header block as received. */
  headerBlock: Buffer;
  header(name: string): string;
  /** The transfer-decoded body (empty for multipart and message/rfc822 containers). */
  body: Buffer;
  /** True for parts inside an embedded message (the returned original of a DSN or ARF report). */
  embedded: boolean;
  /** True for the top header block of a message (the outer one, or an embedded one). */
  messageRoot: boolean;
}

const MAX_HEAD = 256 * 1024;

async function decode(node: SplitNode, chunks: Buffer[]): Promise<Buffer> {
  const decoder = node.getDecoder();
  const out: Buffer[] = [];
  decoder.on('data', (c: Buffer) => out.push(c));
  const done = new Promise<void>((resolve, reject) => {
    decoder.on('end', resolve);
    decoder.on('error', reject);
  });
  for (const c of chunks) decoder.write(c);
  decoder.end();
  await done;
  return Buffer.concat(out);
}

export async function mimeParts(raw: Buffer): Promise<Part[]> {
  const splitter = new Splitter({ maxHeadSize: MAX_HEAD });
  const collected: { node: SplitNode; chunks: Buffer[] }[] = [];
  await new Promise<void>((resolve, reject) => {
    splitter.on('data', (data: { type: string; value?: Buffer } & Partial<SplitNode>) => {
      if (data.type === 'node') collected.push({ node: data as SplitNode, chunks: [] });
      else if (data.type === 'body' && data.value && collected.length)
        collected[collected.length - 1]!.chunks.push(data.value);
    });
    splitter.on('end', resolve);
    splitter.on('error', reject);
    Readable.from([raw]).pipe(splitter);
  });
  const embeddedIn = (n: SplitNode): boolean => {
    for (let p = n.parentNode; p; p = p.parentNode) if (p.contentType === 'message/rfc822') return true;
    return false;
  };
  const parts: Part[] = [];
  for (const { node, chunks } of collected) {
    const contentType = (node.contentType || 'text/plain').toLowerCase();
    parts.push({
      contentType,
      headerBlock: node.getHeaders(),
      header: (name) => node.headers.getFirst(name) ?? '',
      body: node.multipart || contentType === 'message/rfc822' ? Buffer.alloc(0) : await decode(node, chunks),
      embedded: embeddedIn(node),
      messageRoot:
        node.root || node.parentNode === false || (node.parentNode && node.parentNode.contentType === 'message/rfc822'),
    });
  }
  return parts;
}

/**
 * Header-style fields (RFC 5322 §2.2 syntax: folded lines, `Name: value`), as used by the bodies of
 * message/delivery-status (RFC 3464 §2.1: groups separated by blank lines), message/feedback-report
 * (RFC 5965 §3.1) and text/rfc822-headers. Names are lower case; a repeated name keeps the first.
 */
export function fieldGroups(text: string): Record<string, string>[] {
  const groups: Record<string, string>[] = [];
  // No prototype: a field named __proto__ or constructor is data, not a way into the object.
  const fresh = () => Object.create(null) as Record<string, string>;
  let current = fresh();
  let last: string | null = null;
  const flush = () => {
    if (Object.keys(current).length) groups.push(current);
    current = fresh();
    last = null;
  };
  for (const line of text.split(/\r?\n/)) {
    if (line.trim() === '') {
      flush();
      continue;
    }
    if (/^[ \t]/.test(line) && last) {
      current[last] += ` ${line.trim()}`;
      continue;
    }
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    last = name;
    if (!Object.hasOwn(current, name)) current[name] = line.slice(colon + 1).trim();
    else last = null;
  }
  flush();
  return groups;
}
