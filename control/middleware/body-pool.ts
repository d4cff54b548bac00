// Buffers for request bodies, used again request after request (docs/decisions.md #84). A sendEmail keeps its
// body's octets until its row commits, for the rare second composition (core/send.ts, SendOptions.reread): tens of
// milliseconds, through which V8's young-generation collections promote the buffer. A promoted buffer that is then
// let go still counts as external memory until a full collection, and at 100 kB that count is what starts V8's full
// collections: about one a second at ~1,000 sendEmails a second, each marking the whole heap. A buffer taken from
// here was allocated once and stays; nothing is counted again.
//
// A body is lent: its reader gives it back when its request is over (control/app.ts), and must not read it after.

/** Bodies shorter than this are not pooled: a few kB held through a request weigh little. */
export const POOLED_MIN_BYTES = 16 * 1024;
/** Nor longer than this: size classes are powers of two from POOLED_MIN_BYTES up to here. */
export const POOLED_MAX_BYTES = 1024 * 1024;

export interface LentBytes {
  /** `size` octets, a view of a pooled buffer. */
  bytes: Buffer;
  /** Gives the buffer back; later calls do nothing. */
  release(): void;
}

export interface BytePool {
  /** A buffer of `size` octets, contents undefined; undefined for a size outside the pooled ones. */
  take(size: number): LentBytes | undefined;
  /** Octets held by buffers waiting to be taken again (for tests). */
  readonly idleBytes: number;
}

/** `keepBytes`: at most this many octets of buffers wait to be taken again; any given back past it are dropped. */
export function bytePool(keepBytes: number): BytePool {
  // By size class: the free buffers of that many octets.
  const idle = new Map<number, Buffer[]>();
  let idleBytes = 0;
  return {
    get idleBytes() {
      return idleBytes;
    },
    take(size) {
      if (size < POOLED_MIN_BYTES || size > POOLED_MAX_BYTES) return undefined;
      const cls = classOf(size);
      const reused = idle.get(cls)?.pop();
      if (reused) idleBytes -= cls;
      const whole = reused ?? Buffer.allocUnsafeSlow(cls);
      let lent = true;
      return {
        bytes: whole.subarray(0, size),
        release() {
          if (!lent) return;
          lent = false;
          if (idleBytes + cls > keepBytes) return;
          idleBytes += cls;
          const list = idle.get(cls);
          if (list) list.push(whole);
          else idle.set(cls, [whole]);
        },
      };
    },
  };
}

/** The smallest power of two at least `size` (and at least POOLED_MIN_BYTES). */
function classOf(size: number): number {
  let cls = POOLED_MIN_BYTES;
  while (cls < size) cls *= 2;
  return cls;
}
