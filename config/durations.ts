// Durations as operators write them: "90s", "5m", "1h", "2d", "250ms"; a bare number is seconds.
const units: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

export function parseDuration(raw: string): number | null {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(raw);
  if (!m) return null;
  const ms = Number(m[1]) * (units[m[2] ?? 's'] ?? 1000);
  return Number.isFinite(ms) && ms > 0 ? Math.round(ms) : null;
}

export function parseDurationList(raw: string): number[] | null {
  const parts = raw.split(',').filter((s) => s.trim() !== '');
  if (parts.length === 0) return null;
  const out: number[] = [];
  for (const p of parts) {
    const ms = parseDuration(p);
    if (ms === null) return null;
    out.push(ms);
  }
  return out;
}

/** A duration in the largest unit that writes it exactly (300000 → `5m`), as an operator would write it. */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ['d', 86_400_000],
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const)
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  return `${ms}ms`;
}
