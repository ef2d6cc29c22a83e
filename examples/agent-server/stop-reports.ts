/**
 * The `StopReport`s of the turns this instance stopped, for the page's timeline of a stop it did
 * not send itself (another tab, another client, a shutdown): the history has a stop's entries but
 * not its timings. Kept from the runner's `turn_aborted` event, which comes before the stream
 * carries the turn's `turn_aborted` entry, so a page that asks on seeing it finds the report.
 * Memory only, the newest `MAX_STOP_REPORTS`; only the instance that ran the turn has its report.
 */
import type { StopReport } from '../../src/index.js';

/** Reports kept at most; the oldest goes first. */
export const MAX_STOP_REPORTS = 1000;

/** See the file comment. */
export class StopReports {
  readonly #byTurn = new Map<string, StopReport>();

  add(turnId: string, report: StopReport): void {
    this.#byTurn.set(turnId, report);
    if (this.#byTurn.size > MAX_STOP_REPORTS) this.#byTurn.delete(this.#byTurn.keys().next().value!);
  }

  get(turnId: string): StopReport | undefined {
    return this.#byTurn.get(turnId);
  }
}
