/**
 * `stopJob`: stop a BullMQ job whatever its state — running on this or (with a fleet) any worker,
 * waiting, delayed — answering in the words of `runner.requestStop` and `fleet.stop`.
 *
 * Two phases, each with its own way:
 * - Not started (waiting, delayed, prioritized, paused, waiting for children): the stop is written
 *   into the job's data (`JOB_STOP_FIELD`); the worker that takes it fails it with
 *   `JobStoppedError` before any turn (processor.ts invariant 6). A delayed job is promoted, so it
 *   ends now rather than when its delay ran out. The state is read again after the write: a job a
 *   worker took meanwhile may have been read without the mark, so it is stopped as running.
 * - Running: its turn is named from the job (job-turn.ts invariant 2) and stopped through the
 *   fleet (any instance; a turn not registered yet gets the fleet's pending stop, so it starts
 *   cancelled), else through this process's runner when the job runs here.
 */

import type { Job, Queue } from 'bullmq';
import { StopReasons } from '../constants.js';
import { checkId, checkMs, describe } from '../errors.js';
import type { Fleet } from '../fleet/fleet.js';
import type { StopAnswer } from '../fleet/answers.js';
import type { StopReport } from '../turn/report.js';
import type { StopRefusal } from '../turn/pending-stops.js';
import { settledStop } from '../turn/stop-request.js';
import { JOB_STOP_FIELD } from './constants.js';
import { jobSessionId, jobStopMark, jobTurnId } from './job-turn.js';
import { runningHere } from './running.js';

export interface StopJobOptions {
  /** Reach a job running on any instance of this fleet. Without it, only a job running in this process is reached. */
  fleet?: Fleet;
  /** The stop's reason code. @default 'cancel.user' */
  reason?: string;
  /** The grace of a running job's stop. @default the runner's */
  graceMs?: number;
  /** How long `fleet.stop` waits for the owner's acknowledgement. @default 2000 (the fleet's) */
  timeoutMs?: number;
}

/** What became of the stop (`jobId` added to the words of `fleet.stop`). */
export type JobStopAnswer =
  | { outcome: 'stopped'; jobId: string; sessionId: string; turnId: string; report: StopReport }
  | { outcome: 'pending'; jobId: string; sessionId: string; turnId?: string; state?: string }
  | { outcome: 'already_finished'; jobId: string; status?: string; sessionId?: string; turnId?: string }
  | { outcome: 'not_found'; jobId: string; sessionId?: string; turnId?: string }
  | { outcome: 'refused'; jobId: string; why: 'not_here' | 'data_not_object' | StopRefusal; sessionId?: string; turnId?: string }
  | ({ jobId: string } & Extract<StopAnswer, { outcome: 'cancelling' | 'interrupted' | 'relay_unavailable' }>);

const FINISHED = new Set(['completed', 'failed']);

/**
 * Stop job `jobId` of `queue`: see docs/bullmq.md for each answer.
 *
 * @example
 * const answer = await stopJob(queue, jobId, { fleet });
 * // answer.outcome: 'stopped' | 'pending' | 'already_finished' | 'not_found' | 'cancelling' | 'refused' | …
 */
export async function stopJob(queue: Queue, jobId: string, options: StopJobOptions = {}): Promise<JobStopAnswer> {
  checkId('jobId', jobId);
  const { fleet, reason, graceMs, timeoutMs } = checkStopJobOptions(options);
  let job = await queue.getJob(jobId) as Job | undefined;
  if (job === undefined) return { outcome: 'not_found', jobId };
  let state = await job.getState();
  if (state !== 'active') {
    if (FINISHED.has(state)) return { outcome: 'already_finished', jobId, status: state };
    if (state === 'unknown') return { outcome: 'not_found', jobId };
    const data: unknown = job.data ?? {};
    if (typeof data !== 'object' || data === null || Array.isArray(data)) return { outcome: 'refused', jobId, why: 'data_not_object' };
    if (jobStopMark(data) === undefined) await job.updateData({ ...data, [JOB_STOP_FIELD]: { reason, at: Date.now() } });
    state = await job.getState();
    if (FINISHED.has(state)) return { outcome: 'already_finished', jobId, status: state };
    if (state === 'unknown') return { outcome: 'not_found', jobId };
    if (state !== 'active') {
      if (state === 'delayed') await job.promote().catch(() => undefined); // a worker may have taken it: then it is stopped there
      return { outcome: 'pending', jobId, sessionId: jobSessionId(job), state };
    }
    job = await queue.getJob(jobId) as Job | undefined; // taken meanwhile: read its attempt
    if (job === undefined) return { outcome: 'not_found', jobId };
  }
  return stopRunning(queue, job, { fleet, reason, graceMs, timeoutMs });
}

async function stopRunning(queue: Queue, job: Job, options: { fleet?: Fleet; reason: string; graceMs?: number; timeoutMs?: number }): Promise<JobStopAnswer> {
  const jobId = job.id!;
  const { fleet, reason, graceMs, timeoutMs } = options;
  if (fleet !== undefined) {
    const answer = await fleet.stop(jobSessionId(job), { turnId: jobTurnId(job), reason, graceMs, timeoutMs });
    return { ...answer, jobId } as JobStopAnswer;
  }
  const here = runningHere(queue.qualifiedName, jobId);
  if (here === undefined) return { outcome: 'refused', jobId, why: 'not_here', sessionId: jobSessionId(job), turnId: jobTurnId(job) };
  const answer = here.runner.requestStop(here.sessionId, { turnId: here.turnId, reason, graceMs });
  return { ...(await settledStop(answer)), jobId } as JobStopAnswer;
}

function checkStopJobOptions(options: unknown): { fleet?: Fleet; reason: string; graceMs?: number; timeoutMs?: number } {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options: expected an object, got ${describe(options)}`);
  const { fleet, reason, graceMs, timeoutMs } = options as Record<string, unknown>;
  if (fleet !== undefined && typeof (fleet as Fleet).stop !== 'function') throw new TypeError(`options.fleet: expected a Fleet, got ${describe(fleet)}`);
  if (reason !== undefined) checkId('options.reason', reason);
  checkMs('options.graceMs', graceMs);
  checkMs('options.timeoutMs', timeoutMs);
  return { fleet: fleet as Fleet | undefined, reason: (reason as string | undefined) ?? StopReasons.user, graceMs, timeoutMs };
}
