/**
 * A runner's shutdown (`TurnRunner.shutdown`): once begun, the runner starts no turn; the running
 * turns are stopped, then the holds (`RunnerHooks.holdShutdown`, e.g. a fleet recording its stopped
 * turns) are awaited, all within the deadline. It happens once: a second call gets the first's promise.
 */

import { checkFunction } from '../errors.js';
import { waitAtMost } from '../base/within.js';
import type { StopReport } from './report.js';
import { checkShutdownOptions, type ShutdownOptions } from './runner-options.js';

/** Work a shutdown awaits after its stops, given their reports. */
type ShutdownHold = (reports: readonly StopReport[]) => Promise<unknown>;

export class Shutdown {
  /** The shutdown's promise; `undefined` until it begins (then `run` refuses). */
  #promise: Promise<StopReport[]> | undefined;
  /** Work awaited after the stops (`holdShutdown`), e.g. a fleet recording them. */
  readonly #holds = new Set<ShutdownHold>();

  /** True once the shutdown has begun. */
  get begun(): boolean { return this.#promise !== undefined; }

  /**
   * Begins the shutdown (or returns the one begun): `stopAll(reason)` stops the running turns.
   * Throws a TypeError or RangeError naming the option for a bad one, and then begins nothing.
   */
  begin(options: ShutdownOptions | undefined, stopAll: (reason: string) => Promise<StopReport>[]): Promise<StopReport[]> {
    if (this.#promise !== undefined) return this.#promise;
    const { deadlineMs, reason } = checkShutdownOptions(options);
    this.#promise = this.#run(deadlineMs, reason, stopAll);
    return this.#promise;
  }

  /** `RunnerHooks.holdShutdown`: have the shutdown await `hold(reports)` after its stops. */
  hold(hold: ShutdownHold): () => void {
    checkFunction('hold', hold);
    this.#holds.add(hold);
    return () => { this.#holds.delete(hold); };
  }

  /** Resolves with the reports of the stops that ended by `deadlineMs` (the others run on). */
  async #run(deadlineMs: number, reason: string, stopAll: (reason: string) => Promise<StopReport>[]): Promise<StopReport[]> {
    const reports: StopReport[] = [];
    const stops = stopAll(reason).map((stop) => stop.then((report) => { reports.push(report); }));
    const done = Promise.all(stops).then(() => Promise.allSettled([...this.#holds].map((hold) => hold(reports))));
    await waitAtMost(done, deadlineMs);
    return [...reports];
  }
}
