/**
 * Which turn a BullMQ job's attempt is: its session, its turn id, and the stop a `stopJob` left
 * on a job that had not started. One place derives them, so the processor that runs an attempt
 * and `stopJob` (on any process) name the same turn.
 *
 * Invariants:
 * 1. One turn per attempt. BullMQ counts every move to active in `attemptsStarted` (a retry, a job
 *    moved back to wait, a stalled job taken again) and stamps `processedOn`; the turn id holds
 *    both, so no two attempts share one (not even after `job.retry()` resets the counters), and a
 *    retry never meets `TurnIdUsedError`.
 * 2. The turn id is a pure function of fields BullMQ keeps in the job's hash, so `stopJob` reads
 *    the job and names the running attempt's turn without asking its worker.
 * 3. A job stopped before it ran carries the stop in its data (`JOB_STOP_FIELD`): the data BullMQ
 *    hands the processor is read when the job moves to active, so a stop written while the job
 *    waits is seen by whichever worker takes it (stop-job.ts re-checks the state after writing).
 */

import { checkId } from '../errors.js';
import { JOB_STOP_FIELD } from './constants.js';


/** What a processor needs of a BullMQ job (a `Job` of `bullmq` is one). */
export interface JobLike {
  readonly id?: string;
  readonly queueName: string;
  readonly data: unknown;
  readonly attemptsStarted: number;
  readonly processedOn?: number;
}

/** The stop `stopJob` left on a job that had not started. */
export interface JobStopMark {
  reason: string;
  /** Epoch ms of the `stopJob` call. */
  at: number;
}

/** The job's session: `job.data.sessionId` when it is a non-empty string, else the job id. */
export function jobSessionId(job: JobLike): string {
  const data = job.data as { sessionId?: unknown } | null | undefined;
  const own = typeof data === 'object' && data !== null ? data.sessionId : undefined;
  if (typeof own !== 'string' || own.length === 0) return jobIdOf(job);
  checkId('job.data.sessionId', own);
  return own;
}

/**
 * The turn id of the job's current attempt (invariant 1):
 * `bullmq:<queue>:<jobId>:<attemptsStarted>:<processedOn>`.
 */
export function jobTurnId(job: JobLike): string {
  const turnId = `bullmq:${job.queueName}:${jobIdOf(job)}:${job.attemptsStarted}:${job.processedOn ?? 0}`;
  checkId('turn id (queue name and job id)', turnId);
  return turnId;
}

/** The stop left on the job's data by `stopJob`, or undefined. */
export function jobStopMark(data: unknown): JobStopMark | undefined {
  if (typeof data !== 'object' || data === null) return undefined;
  const mark = (data as Record<string, unknown>)[JOB_STOP_FIELD] as Partial<JobStopMark> | undefined;
  if (typeof mark !== 'object' || mark === null || typeof mark.reason !== 'string') return undefined;
  return { reason: mark.reason, at: typeof mark.at === 'number' ? mark.at : 0 };
}

function jobIdOf(job: JobLike): string {
  if (typeof job.id !== 'string' || job.id.length === 0) {
    throw new TypeError('job.id: a job the worker took always has an id; got none');
  }
  return job.id;
}
