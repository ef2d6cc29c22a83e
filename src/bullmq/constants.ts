/**
 * `fullstop/bullmq`'s reason lists, bounds and codes, in one place; its defaults are stated in
 * src/constants.ts with every other default, and re-exported here for the subpath's modules.
 */

import { FleetReasons, StopReasons } from '../constants.js';

export { DEFAULT_BULLMQ_PROGRESS_INTERVAL_MS as DEFAULT_PROGRESS_INTERVAL_MS, DEFAULT_BULLMQ_PROGRESS_MAX_BYTES as DEFAULT_PROGRESS_MAX_BYTES, DEFAULT_BULLMQ_REQUEUE_DELAY_MS as DEFAULT_REQUEUE_DELAY_MS } from '../constants.js';

/** The stop reasons that send a job back to wait instead of failing it: this instance is going away. */
export const REQUEUE_REASONS: readonly string[] = Object.freeze([StopReasons.shutdown, FleetReasons.leaseLost]);

/** The bounds of `progress.maxBytes`, in UTF-8 bytes. */
export const MIN_PROGRESS_MAX_BYTES = 64;
export const MAX_PROGRESS_MAX_BYTES = 1 << 20;

/** The field of `job.data` where `stopJob` leaves the stop of a job that has not run. */
export const JOB_STOP_FIELD = '$fullstopStop';

/** `JobStoppedError`'s code. */
export const JOB_STOPPED = 'ERR_FULLSTOP_JOB_STOPPED';
