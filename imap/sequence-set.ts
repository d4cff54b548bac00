// Sequence sets (RFC 3501 §9 `sequence-set`): "1:*", "2,4:7", "*". Parsed into ranges whose bounds may
// be "*"; resolved against a mailbox's message count (sequence numbers) or its UIDs; and written back
// compressed for COPYUID and APPENDUID (RFC 4315 §3). SEARCHRES's "$" (RFC 5182) is not offered.
import { MAX_NUMBER } from './limits.js';

export type SeqBound = number | '*';
export interface SeqRange {
  readonly from: SeqBound;
  readonly to: SeqBound;
}
/** Never empty; ranges in the order the client wrote them. */
export type SequenceSet = readonly SeqRange[];

const NZ_NUMBER = /^[1-9][0-9]*$/;

function bound(text: string): SeqBound | null {
  if (text === '*') return '*';
  if (!NZ_NUMBER.test(text)) return null;
  const n = Number(text);
  // RFC 3501 §9: `nz-number` is a non-zero unsigned 32-bit integer.
  return n <= MAX_NUMBER ? n : null;
}

/** The set `text` stands for, or null when it is not RFC 3501 §9 `sequence-set`. */
export function parseSequenceSet(text: string): SequenceSet | null {
  if (text === '') return null;
  const ranges: SeqRange[] = [];
  for (const item of text.split(',')) {
    const colon = item.indexOf(':');
    const from = bound(colon < 0 ? item : item.slice(0, colon));
    const to = colon < 0 ? from : bound(item.slice(colon + 1));
    if (from === null || to === null) return null;
    ranges.push({ from, to });
  }
  return ranges;
}

function value(b: SeqBound, star: number): number {
  return b === '*' ? star : b;
}

/** Ranges as ascending [low, high] pairs, sorted and merged. RFC 3501 §9: "2:4" and "4:2" are equivalent. */
function normalize(set: SequenceSet, star: number): [number, number][] {
  const pairs = set
    .map((r): [number, number] => {
      const a = value(r.from, star);
      const b = value(r.to, star);
      return a <= b ? [a, b] : [b, a];
    })
    .sort((x, y) => x[0] - y[0]);
  const merged: [number, number][] = [];
  for (const p of pairs) {
    const last = merged[merged.length - 1];
    if (last && p[0] <= last[1] + 1) last[1] = Math.max(last[1], p[1]);
    else merged.push([p[0], p[1]]);
  }
  return merged;
}

export type SeqResolution = { ok: true; ranges: [number, number][] } | { ok: false; reason: string };

/**
 * Message sequence numbers against a mailbox of `count` messages: ascending, merged [low, high] ranges.
 * RFC 3501 §9 (`seq-number`): "*" is the largest number in use, and a number outside 1..count is invalid,
 * so such a set is refused (BAD), as is any set in an empty mailbox.
 */
export function resolveSequenceNumbers(set: SequenceSet, count: number): SeqResolution {
  if (count === 0) return { ok: false, reason: 'the mailbox is empty' };
  const ranges = normalize(set, count);
  const last = ranges[ranges.length - 1];
  if (last && last[1] > count) return { ok: false, reason: `message ${last[1]} does not exist (${count} messages)` };
  return { ok: true, ranges };
}

/**
 * The UIDs of `uids` (ascending, as a mailbox holds them) that `set` names. RFC 3501 §6.4.8: UIDs not in
 * the mailbox are ignored, and "*" is the largest UID in use, so "100:*" names the last message even when
 * its UID is below 100.
 */
export function resolveUids(set: SequenceSet, uids: readonly number[]): number[] {
  const max = uids[uids.length - 1];
  if (max === undefined) return [];
  const out: number[] = [];
  for (const [low, high] of normalize(set, max)) {
    for (let i = lowerBound(uids, low); i < uids.length && (uids[i] as number) <= high; i++)
      out.push(uids[i] as number);
  }
  return out;
}

function lowerBound(sorted: readonly number[], target: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if ((sorted[mid] as number) < target) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Whether `n` is in `set`, "*" standing for `star`. */
export function sequenceSetHas(set: SequenceSet, n: number, star: number): boolean {
  return set.some((r) => {
    const a = value(r.from, star);
    const b = value(r.to, star);
    return n >= Math.min(a, b) && n <= Math.max(a, b);
  });
}

/**
 * Numbers written as a sequence set, runs of consecutive ascending numbers as "a:b", in the order given:
 * RFC 4315 §3 pairs COPYUID's source and destination sets element by element, so neither may be sorted
 * apart from the other. [1,2,3,7,5,6] → "1:3,7,5:6".
 */
export function formatSequenceSet(numbers: readonly number[]): string {
  const parts: string[] = [];
  let i = 0;
  while (i < numbers.length) {
    const start = numbers[i] as number;
    let end = start;
    while (i + 1 < numbers.length && numbers[i + 1] === end + 1) end = numbers[++i] as number;
    parts.push(start === end ? String(start) : `${start}:${end}`);
    i++;
  }
  return parts.join(',');
}
