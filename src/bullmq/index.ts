/**
 * `fullstop/bullmq`: a BullMQ job is a turn. `turnProcessor` runs each attempt of a job as one
 * turn of a `TurnRunner` (or a `Fleet`); `stopJob` stops a job whatever its state. `bullmq` (6.x)
 * is an optional peer dependency, loaded only by this entry point. See docs/bullmq.md.
 */

export {
  turnProcessor, REQUEUE_REASONS, DEFAULT_REQUEUE_DELAY_MS,
  type TurnProcessorOptions, type TurnProcessor, type JobTurnBody,
} from './processor.js';
export { stopJob, type StopJobOptions, type JobStopAnswer } from './stop-job.js';
export { JobStoppedError, JOB_STOPPED } from './errors.js';
export { jobSessionId, jobTurnId, JOB_STOP_FIELD, type JobLike } from './job-turn.js';
export { DEFAULT_PROGRESS_INTERVAL_MS, DEFAULT_PROGRESS_MAX_BYTES, type ProgressOptions, type TurnProgress } from './progress.js';
