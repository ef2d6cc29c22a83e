/**
 * `requeueOnClose(worker)`: `worker.close()` as a shutdown of that worker's jobs. BullMQ's
 * `close()` waits for the running jobs to finish and stops none; with this, the turns of the
 * jobs that worker runs are stopped with `cancel.shutdown` when it starts closing, so their jobs
 * go back to wait (processor.ts invariant 4) and `close()` resolves once they have — while the
 * runner itself, and the turns it runs for anyone else, go on.
 */

import type { Worker } from 'bullmq';
import { StopReasons } from '../constants.js';
import { checkMs, describe } from '../errors.js';
import { runningWith } from './running.js';

/**
 * Stop the turns of `worker`'s jobs (those `turnProcessor` runs in this process) with reason
 * `cancel.shutdown` when the worker starts closing. Returns the function that undoes it.
 *
 * @example
 * requeueOnClose(worker);
 * process.on('SIGTERM', () => worker.close());   // running jobs go back to wait, no attempt counted
 */
export function requeueOnClose(worker: Worker, options: { graceMs?: number } = {}): () => void {
  if (typeof (worker as Partial<Worker> | null)?.on !== 'function' || typeof worker.id !== 'string') {
    throw new TypeError(`worker: expected a BullMQ Worker, got ${describe(worker)}`);
  }
  const graceMs = options.graceMs;
  checkMs('options.graceMs', graceMs);
  const onClosing = (): void => {
    for (const job of runningWith(worker.qualifiedName, `${worker.id}:`)) {
      job.runner.requestStop(job.sessionId, { turnId: job.turnId, reason: StopReasons.shutdown, graceMs });
    }
  };
  worker.on('closing', onClosing);
  return () => { worker.off('closing', onClosing); };
}
