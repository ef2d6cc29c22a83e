/**
 * The stop metrics: `fullstop.stop.duration`, one measurement a stop (ms from the stop request to
 * `turn_aborted`, which is the report's `emittedAt`), and `fullstop.stop.hard`, what each stop had
 * to hard-stop, by kind.
 */

import type { Counter, Histogram, Meter } from '@opentelemetry/api';
import type { StopReport } from '../turn/report.js';
import { HARD_KIND, STOP_DURATION, STOP_HARD, StopAttr } from './names.js';

/**
 * Bucket bounds in ms: a cooperative stop takes well under a millisecond to a few, a hard one
 * the grace window (100 ms by default) and then some, a slow disk a few hundred more.
 */
const DURATION_BUCKETS = [0.25, 0.5, 1, 2, 5, 10, 25, 50, 100, 150, 250, 500, 1000, 2500, 5000, 10_000];

/** The counter's `fullstop.hard.kind` for each count of `StopReport.hardStopped`. */
const HARD_KINDS = [['worker', 'workers'], ['process_group', 'processGroups'], ['question', 'questions']] as const;

export class StopMetrics {
  readonly #duration: Histogram;
  readonly #hard: Counter;

  constructor(meter: Meter) {
    this.#duration = meter.createHistogram(STOP_DURATION, {
      description: 'Time from a stop request to the turn_aborted event',
      unit: 'ms',
      advice: { explicitBucketBoundaries: DURATION_BUCKETS },
    });
    this.#hard = meter.createCounter(STOP_HARD, {
      description: 'Workers terminated, process groups killed and questions rejected by the hard stop',
      unit: '{item}',
    });
  }

  /** One stop's measurements; a kind with a count of zero adds nothing. */
  record(report: StopReport): void {
    if (Number.isFinite(report.emittedAt)) this.#duration.record(report.emittedAt, { [StopAttr.reason]: report.reason });
    for (const [kind, field] of HARD_KINDS) {
      const count = report.hardStopped?.[field] ?? 0;
      if (count > 0) this.#hard.add(count, { [HARD_KIND]: kind });
    }
  }
}
