/**
 * The gaps between two checks of the token, summed over every probe run: the bins each run's
 * record holds (workers/probe-record.ts), the longest gap and where it ended.
 *
 * A run that was hard-stopped ended inside a gap its record could not close: that stretch lasted
 * at least from its last check to the moment the run settled. It counts toward the longest gap
 * (as the lower bound it is) but not toward the median, which holds complete gaps only.
 */

import {
  BIN_COUNT, binMiddleMs, readSite, T_CHECKS, T_LAST, T_MAX_GAP, type ProbeRecord,
} from '../../workers/probe-record.js';

/** Gaps summed over the runs of one probe (see above). */
export class GapTally {
  readonly #bins = new Float64Array(BIN_COUNT);
  /** Complete gaps seen. */
  count = 0;
  /** Checks the user's code made, over all runs. */
  checks = 0;
  maxMs = 0;
  /**
   * Where the longest complete gap ended (a call site, or a phrase for the end of the task): the
   * place to act on even when a stretch cut short by a hard stop measured longer, since where
   * that one would have ended is unknown. `'(cut short by the hard stop)'` only when no complete
   * gap names a place.
   */
  site: string | undefined;
  /** The longest complete gap. */
  #completeMs = 0;

  /** Add one run's record. `cutAt`: the shared-clock moment a hard-stopped run settled. */
  add(record: ProbeRecord, cutAt?: number): void {
    const bins = new Float64Array(record.bins);
    for (let i = 0; i < BIN_COUNT; i++) {
      this.#bins[i]! += bins[i]!;
      this.count += bins[i]!;
    }
    const times = new Float64Array(record.times);
    this.checks += times[T_CHECKS]! || 0;
    if (times[T_MAX_GAP]! > this.#completeMs) {
      this.#completeMs = times[T_MAX_GAP]!;
      this.site = readSite(record) ?? this.site;
    }
    const open = cutAt === undefined ? NaN : cutAt - times[T_LAST]!;
    this.maxMs = Math.max(this.maxMs, this.#completeMs, open || 0);
    if (open > this.#completeMs && this.site === undefined) this.site = '(cut short by the hard stop)';
  }

  /** The median complete gap (to its bin, about ±2%), never above the longest one. */
  medianMs(): number {
    if (this.count === 0) return this.maxMs;
    let seen = 0;
    for (let i = 0; i < BIN_COUNT; i++) {
      seen += this.#bins[i]!;
      if (seen >= this.count / 2) return Math.min(binMiddleMs(i), this.maxMs);
    }
    return this.maxMs;
  }
}
