/**
 * `turnProcessor`: a BullMQ processor that runs each attempt of a job as one turn of a
 * `TurnRunner` (through a `Fleet` when given one), and tells BullMQ what became of it.
 *
 * Invariants (what BullMQ is told, by the turn's end):
 * 1. `completed` → the body's value is the job's return value.
 * 2. `failed` → the body's error is thrown: BullMQ fails the attempt and retries it as the job's
 *    `attempts` and `backoff` say.
 * 3. `cancelled` by a stop the user asked for (BullMQ's `worker.cancelJob`, `stopJob`, a fleet
 *    stop: any reason outside `REQUEUE_REASONS`) → `JobStoppedError`, an `UnrecoverableError`: the
 *    job fails for good, no retry.
 * 4. `cancelled` because this instance is going away (`REQUEUE_REASONS`: `runner.shutdown()`'s
 *    `cancel.shutdown`, a fleet's `lease.lost`) → the job is moved back to wait (`job.moveToWait`)
 *    and `WaitingError` thrown: BullMQ neither fails it nor counts an attempt (`attemptsMade` stays),
 *    and any worker takes it again as a new attempt (a new turn id, job-turn.ts invariant 1).
 * 5. No turn could start because this instance cannot take one now (the runner is shutting down,
 *    the fleet is closed, the session is busy — a dead worker's attempt still holds it until its
 *    lease ends) → the job is delayed `requeueDelayMs` without counting an attempt
 *    (`job.moveToDelayed` + `DelayedError`), never failed for it.
 * 6. A job `stopJob` marked before it ran fails with `JobStoppedError` before any turn: its body
 *    never runs.
 */

import { DelayedError, WaitingError, type Job } from 'bullmq';
import { StopReasons, ErrorCodes } from '../constants.js';
import { checkFunction, checkMs, describe } from '../errors.js';
import type { Turn } from '../turn/active-turn.js';
import type { TurnOutcome } from '../turn/report.js';
import type { TurnRunner } from '../turn/runner.js';
import type { Fleet } from '../fleet/fleet.js';
import { JobStoppedError } from './errors.js';
import { jobSessionId, jobStopMark, jobTurnId } from './job-turn.js';
import {
  DEFAULT_PROGRESS_INTERVAL_MS, DEFAULT_PROGRESS_MAX_BYTES, DEFAULT_REQUEUE_DELAY_MS, MAX_PROGRESS_MAX_BYTES, MIN_PROGRESS_MAX_BYTES,
  REQUEUE_REASONS,
} from './constants.js';
import { followProgress, type ProgressOptions, type TurnProgress } from './progress.js';
import { trackRunning } from './running.js';

/** The refusals that delay the job instead of failing it (invariant 5), by code. */
const NOT_NOW = new Set<string>([ErrorCodes.shuttingDown, ErrorCodes.sessionBusy, ErrorCodes.fleetClosed]);

export interface TurnProcessorOptions {
  /** This process's runner: every attempt is one of its turns. */
  runner: TurnRunner;
  /** When given, the turn runs through `fleet.run`, so a stop from any instance (`stopJob` with the fleet) reaches it. */
  fleet?: Fleet;
  /** How the job's progress follows the turn's `say` and tool progress; `false`: not at all. @default { intervalMs: 250, maxBytes: 4096 } */
  progress?: ProgressOptions | false;
  /** How long a job waits (delayed, no attempt counted) when no turn can start now (invariant 5). @default 1000 */
  requeueDelayMs?: number;
}

/** The body of a job's turn: its value is the job's return value. */
export type JobTurnBody<D, R> = (job: Job<D, R>, turn: Turn) => Promise<R>;

/** A BullMQ processor (it declares the signal parameter, so BullMQ gives it one). */
export type TurnProcessor<D, R> = (job: Job<D, R>, token: string | undefined, signal: AbortSignal | undefined) => Promise<R>;

/**
 * A BullMQ processor running each attempt of a job as one turn (see the invariants above and
 * docs/bullmq.md).
 *
 * @example
 * const worker = new Worker('agent', turnProcessor({ runner, fleet }, async (job, turn) => {
 *   await turn.say('working on it');
 *   return turn.tool('build', {}, (token) => exec('make', [], { token }));
 * }), { connection: redis });
 */
export function turnProcessor<D = unknown, R = unknown>(options: TurnProcessorOptions, body: JobTurnBody<D, R>): TurnProcessor<D, R> {
  const { runner, fleet, progress, requeueDelayMs } = checkOptions(options);
  checkFunction('body', body);
  return async function processTurn(job, token, signal) {
    const mark = jobStopMark(job.data);
    if (mark !== undefined) throw new JobStoppedError(mark.reason, undefined);
    const sessionId = jobSessionId(job);
    const turnId = jobTurnId(job);
    const untrack = trackRunning(job.queueQualifiedName, job.id!, { runner, sessionId, turnId, token });
    const follower = progress === false ? undefined
      : followProgress(runner, turnId, (p: TurnProgress) => job.updateProgress(p as never), progress);
    let outcome: TurnOutcome<R>;
    try {
      const run = (turn: Turn) => body(job, turn);
      // BullMQ's cancel is the user's stop: its text (`worker.cancelJob(id, text)`) is not a reason
      // code, so it is kept as the stop's `detail`, never recorded as its reason.
      const runOptions = signal === undefined ? { turnId } : { turnId, signal, signalReason: StopReasons.user };
      outcome = fleet !== undefined ? await fleet.run(sessionId, run, runOptions) : await runner.run(sessionId, run, runOptions);
    } catch (error) {
      if (NOT_NOW.has((error as { code?: unknown } | null)?.code as string)) {
        await job.moveToDelayed(Date.now() + requeueDelayMs, token).catch(() => undefined);
        throw new DelayedError(`no turn can start now (${(error as Error).message}); delayed ${requeueDelayMs} ms`);
      }
      throw error;
    } finally {
      untrack();
      await follower?.end();
    }
    return settle(job, token, outcome);
  };
}

async function settle<R>(job: Job, token: string | undefined, outcome: TurnOutcome<R>): Promise<R> {
  if (outcome.status === 'completed') return outcome.value;
  if (outcome.status === 'failed') throw asError(outcome.error);
  const reason = outcome.report.reason;
  if (REQUEUE_REASONS.includes(reason)) {
    // A lock already lost (a stalled check took the job) leaves BullMQ's own retry to act.
    await job.moveToWait(token).catch(() => undefined);
    throw new WaitingError(`turn ${outcome.turnId} stopped (reason ${reason}); the job waits to be retried`);
  }
  throw new JobStoppedError(reason, outcome.turnId);
}

function asError(error: unknown): Error {
  return error instanceof Error ? error : new Error(describe(error), { cause: error });
}

function checkOptions(options: unknown): {
  runner: TurnRunner; fleet: Fleet | undefined; progress: Required<ProgressOptions> | false; requeueDelayMs: number;
} {
  if (typeof options !== 'object' || options === null) throw new TypeError(`options: expected an object, got ${describe(options)}`);
  const { runner, fleet, progress, requeueDelayMs } = options as Record<string, unknown>;
  if (typeof (runner as TurnRunner | undefined)?.run !== 'function') throw new TypeError(`options.runner: expected a TurnRunner, got ${describe(runner)}`);
  if (fleet !== undefined && typeof (fleet as Fleet).run !== 'function') throw new TypeError(`options.fleet: expected a Fleet, got ${describe(fleet)}`);
  checkMs('options.requeueDelayMs', requeueDelayMs);
  return {
    runner: runner as TurnRunner,
    fleet: fleet as Fleet | undefined,
    progress: progress === false ? false : checkProgress(progress),
    requeueDelayMs: requeueDelayMs ?? DEFAULT_REQUEUE_DELAY_MS,
  };
}

function checkProgress(progress: unknown): Required<ProgressOptions> {
  if (progress !== undefined && (typeof progress !== 'object' || progress === null)) {
    throw new TypeError(`options.progress: expected an object or false, got ${describe(progress)}`);
  }
  const { intervalMs, maxBytes } = (progress ?? {}) as Record<string, unknown>;
  checkMs('options.progress.intervalMs', intervalMs);
  if (maxBytes !== undefined && (typeof maxBytes !== 'number' || !Number.isInteger(maxBytes) || maxBytes < MIN_PROGRESS_MAX_BYTES || maxBytes > MAX_PROGRESS_MAX_BYTES)) {
    throw new RangeError(`options.progress.maxBytes: expected an integer from ${MIN_PROGRESS_MAX_BYTES} to ${MAX_PROGRESS_MAX_BYTES} bytes, got ${describe(maxBytes)}`);
  }
  return { intervalMs: intervalMs ?? DEFAULT_PROGRESS_INTERVAL_MS, maxBytes: (maxBytes as number | undefined) ?? DEFAULT_PROGRESS_MAX_BYTES };
}
