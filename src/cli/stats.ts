/** Percentiles of stop latencies, and the rounding every reported figure goes through. */

export interface Percentiles {
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/** Nearest-rank percentiles (each one a value that was measured); zeros for no values. */
export function percentiles(values: readonly number[]): Percentiles {
  if (values.length === 0) return { p50: 0, p90: 0, p99: 0, max: 0 };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (q: number) => round(sorted[Math.max(0, Math.ceil(q * sorted.length) - 1)]!);
  return { p50: at(0.5), p90: at(0.9), p99: at(0.99), max: round(sorted[sorted.length - 1]!) };
}

/** Milliseconds to the microsecond: finer than any figure here can be trusted. */
export function round(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** A duration for people: three significant figures, at most µs resolution. */
export function formatMs(ms: number): string {
  if (ms >= 1000) return `${(ms / 1000).toFixed(ms >= 10_000 ? 1 : 2)} s`;
  if (ms >= 100) return `${ms.toFixed(0)} ms`;
  if (ms >= 10) return `${ms.toFixed(1)} ms`;
  if (ms >= 1) return `${ms.toFixed(2)} ms`;
  return `${ms.toFixed(3)} ms`;
}

/** `n` of `total` as a whole percentage, never rounding a non-zero share to 0 or a partial one to 100. */
export function percent(n: number, total: number): string {
  if (total === 0) return '0%';
  const p = Math.round((100 * n) / total);
  return `${n > 0 && p === 0 ? '<1' : n < total && p === 100 ? '>99' : p}%`;
}
