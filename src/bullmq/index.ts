/**
 * `fullstop/bullmq`: a BullMQ job is a turn. `turnProcessor` runs each attempt of a job as one
 * turn of a `TurnRunner` (or a `Fleet`); `stopJob` stops a job whatever its state. `bullmq` (6.x)
 * is an optional peer dependency, loaded only by this entry point. See docs/bullmq.md.
 */

export { turnProcessor, type TurnProcessorOptions, type TurnProcessor, type JobTurnBody } from './processor.js';
export { requeueOnClose } from './on-close.js';
export { stopJob, type StopJobOptions, type JobStopAnswer } from './stop-job.js';
export { JobStoppedError } from './errors.js';
export { jobSessionId, jobTurnId, type JobLike } from './job-turn.js';
export type { ProgressOptions, TurnProgress } from './progress.js';
export {
  REQUEUE_REASONS, DEFAULT_REQUEUE_DELAY_MS, DEFAULT_PROGRESS_INTERVAL_MS, DEFAULT_PROGRESS_MAX_BYTES, JOB_STOP_FIELD, JOB_STOPPED,
} from './constants.js';
