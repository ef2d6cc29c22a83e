/**
 * `fullstop/bullmq`'s defaults, reason lists and codes, in one place (the core ones are in
 * src/constants.ts).
 */

import { FleetReasons, StopReasons } from '../constants.js';

/** The stop reasons that send a job back to wait instead of failing it: this instance is going away. */
export const REQUEUE_REASONS: readonly string[] = Object.freeze([StopReasons.shutdown, FleetReasons.leaseLost]);

/** How long a job that could not start a turn now waits (delayed, no attempt counted), in ms. */
export const DEFAULT_REQUEUE_DELAY_MS = 1000;

/** The least time between two `job.updateProgress` calls of a job, in ms. */
export const DEFAULT_PROGRESS_INTERVAL_MS = 250;

/** The most UTF-8 bytes of text one job progress carries. */
export const DEFAULT_PROGRESS_MAX_BYTES = 4096;
/** The bounds of `progress.maxBytes`, in UTF-8 bytes. */
export const MIN_PROGRESS_MAX_BYTES = 64;
export const MAX_PROGRESS_MAX_BYTES = 1 << 20;

/** The field of `job.data` where `stopJob` leaves the stop of a job that has not run. */
export const JOB_STOP_FIELD = '$fullstopStop';

/** `JobStoppedError`'s code. */
export const JOB_STOPPED = 'ERR_FULLSTOP_JOB_STOPPED';
