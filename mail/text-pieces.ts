// A message's text as the composer writes it: pieces (a header, the slices of a text between its soft line breaks, the
// CRLFs between them) in a list, written out as octets a chunk of pieces at a time, and how long a string made of a
// message may be.
//
// V8 keeps an object of more than 128 KiB (its largest regular heap object) on pages of its own, mapped for it and
// unmapped once it is collected: a page fault every 4 kB, ~10 µs each on a machine under PVM (docs/decisions.md #85).
// Both a string of a whole large message and one array of all its pieces were such objects: at 1 MB of text, ~50,000
// pieces, whose array grew through ever larger copies of itself. So the pieces go into arrays of at most SEGMENT
// items, and the octets are made a chunk of at most STRING_CHUNK characters at a time.

/** Characters (octets, for the latin1 strings of a message) of one chunk, at most: half of V8's 128 KiB. */
export const STRING_CHUNK = 64 * 1024;

/**
 * Characters of the longest message made as one string (one join, then its octets): under V8's 128 KiB with room for
 * the string's header. Cheaper than chunks for a message that fits: at 100 kB, ~0.04 ms of ~0.3.
 */
export const WHOLE_STRING = 127 * 1024;

/** Pieces an array of the list holds: 64 kB of pointers, under V8's 128 KiB; a 100 kB message's ~5,000 fit in one. */
const SEGMENT = 8192;

/** What the encoders write into: a PieceList, or any array of strings. */
export interface PieceSink {
  push(a: string, b?: string): unknown;
  /** How many pieces; set lower, it drops the pieces after (an encoder that finds it cannot take a text). */
  length: number;
}

/** An append-only list of strings in arrays of SEGMENT items. */
export class PieceList implements PieceSink {
  private full: string[][] = [];
  private last: string[] = [];

  push(a: string, b?: string): void {
    let last = this.last;
    if (last.length === SEGMENT) last = this.next();
    last.push(a);
    if (b === undefined) return;
    if (last.length === SEGMENT) last = this.next();
    last.push(b);
  }

  private next(): string[] {
    this.full.push(this.last);
    return (this.last = []);
  }

  get length(): number {
    return this.full.length * SEGMENT + this.last.length;
  }

  set length(n: number) {
    if (n >= this.length) return;
    const k = Math.floor(n / SEGMENT);
    if (k < this.full.length) {
      this.last = this.full[k]!;
      this.full.length = k;
    }
    this.last.length = n - k * SEGMENT;
  }

  /** The piece at `i` (0 ≤ i < length). */
  at(i: number): string {
    const k = Math.floor(i / SEGMENT);
    return (k < this.full.length ? this.full[k]! : this.last)[i - k * SEGMENT]!;
  }

  /** Whether a piece from `from` on satisfies `test`. */
  someFrom(from: number, test: (s: string) => boolean): boolean {
    for (let i = from; i < this.length; i++) if (test(this.at(i))) return true;
    return false;
  }

  /** The arrays that hold the pieces, in order (not to be changed). */
  segments(): readonly (readonly string[])[] {
    return this.full.length === 0 ? [this.last] : [...this.full, this.last];
  }
}
