/**
 * The shared record of one probe run: how the probe worker (workers/probe-task.ts) tells the main
 * thread when the task started, when it last checked its token, and how long the stretches
 * between two checks were. Both sides import this layout, so it is stated once.
 *
 * It lives in shared memory rather than in the task's result because the runs that matter most
 * are the ones that never return: a hard stop terminates the worker, and what the record already
 * holds is all that is left of that run.
 *
 * Times are `performance.timeOrigin + performance.now()` (ms): each thread has its own time
 * origin, and this sum is the one clock both sides share.
 */

/** Gaps are binned by microseconds on a log scale: this many bins per doubling (about ±2% each). */
export const BINS_PER_OCTAVE = 16;
/** Bin 0 holds gaps under 1 µs; the last bin everything past 2^36 µs (19 hours). */
export const BIN_COUNT = 1 + 36 * BINS_PER_OCTAVE;

/** Int32 cell of `control`: 1 once the user's function has been called. */
export const C_STARTED = 0;
/** When the user's function was called. */
export const T_START = 0;
/** When the gap now open began (the last check, or the start). */
export const T_LAST = 1;
/** The longest complete gap so far (ms). */
export const T_MAX_GAP = 2;
/** When the user's function settled (NaN while it runs, and for ever after a hard stop). */
export const T_END = 3;
/** How many checks the user's code made. */
export const T_CHECKS = 4;
const TIME_CELLS = 5;
/** Bytes of `site`: the UTF-8 call site of the check that ended the longest gap, NUL-padded. */
export const SITE_BYTES = 512;

export interface ProbeRecord {
  /** `[C_STARTED]` goes 0 → 1 (and is notified) when the user's function is called. */
  readonly control: SharedArrayBuffer;
  /** `[T_START, T_LAST, T_MAX_GAP, T_END, T_CHECKS]`, NaN until set. */
  readonly times: SharedArrayBuffer;
  /** `BIN_COUNT` counts of complete gaps. */
  readonly bins: SharedArrayBuffer;
  readonly site: SharedArrayBuffer;
}

/** Message prefix of the probe worker's error for a module that failed to load. */
export const LOAD_FAILED = 'fullstop-probe:load:';
/** Message prefix of the probe worker's error for a module without the export asked for. */
export const NO_EXPORT = 'fullstop-probe:export:';

/** What the probe worker is sent for each run (the pool's task payload). */
export interface ProbeJob {
  readonly filename: string;
  readonly name: string;
  readonly task: unknown;
  readonly record: ProbeRecord;
}

/** A fresh record for one run. */
export function newRecord(): ProbeRecord {
  const times = new SharedArrayBuffer(8 * TIME_CELLS);
  new Float64Array(times).fill(NaN);
  return {
    control: new SharedArrayBuffer(4),
    times,
    bins: new SharedArrayBuffer(8 * BIN_COUNT),
    site: new SharedArrayBuffer(SITE_BYTES),
  };
}

/** The one clock both threads share (see above). */
export function sharedNow(): number {
  return performance.timeOrigin + performance.now();
}

/** The bin of a gap of `gapMs`. */
export function binOf(gapMs: number): number {
  const us = gapMs * 1000;
  if (!(us >= 1)) return 0;
  return Math.min(BIN_COUNT - 1, 1 + Math.floor(Math.log2(us) * BINS_PER_OCTAVE));
}

/** The middle of bin `bin`, in ms (geometric, as the bins are). */
export function binMiddleMs(bin: number): number {
  if (bin === 0) return 0.0005;
  return 2 ** ((bin - 1 + 0.5) / BINS_PER_OCTAVE) / 1000;
}

/** The call site written by the worker, or undefined if none was. */
export function readSite(record: ProbeRecord): string | undefined {
  const bytes = new Uint8Array(record.site);
  const end = bytes.indexOf(0);
  const text = new TextDecoder().decode(bytes.slice(0, end === -1 ? bytes.length : end));
  return text === '' ? undefined : text;
}
