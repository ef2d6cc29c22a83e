/**
 * The error a stopped job fails with. It is BullMQ's `UnrecoverableError`, so BullMQ fails the job
 * for good whatever attempts remain: a stop the user asked for is not retried.
 */

import { UnrecoverableError } from 'bullmq';
import { JOB_STOPPED } from './constants.js';


/**
 * A job's turn was stopped (by `worker.cancelJob`, `stopJob`, a fleet stop), or `stopJob` stopped
 * the job before it ran. The job's `failedReason` is this error's message.
 *
 * @example
 * worker.on('failed', (job, error) => {
 *   if ((error as { code?: string }).code === 'ERR_FULLSTOP_JOB_STOPPED') log('stopped', job?.id);
 * });
 */
export class JobStoppedError extends UnrecoverableError {
  override readonly name: string = 'JobStoppedError';
  /** `'ERR_FULLSTOP_JOB_STOPPED'` */
  readonly code: string = JOB_STOPPED;
  /** The stop's reason code (`cancel.user` for BullMQ's own cancel). */
  readonly reason: string;
  /** The turn that was stopped; undefined when the job was stopped before it ran. */
  readonly turnId: string | undefined;
  constructor(reason: string, turnId: string | undefined) {
    super(turnId === undefined
      ? `stopped before it ran (reason ${reason})`
      : `turn ${turnId} stopped (reason ${reason})`);
    this.reason = reason;
    this.turnId = turnId;
  }
}
