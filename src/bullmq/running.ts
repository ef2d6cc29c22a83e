/**
 * The jobs this process runs as turns, so `stopJob` without a fleet reaches a job that runs here.
 * Keyed by the queue's qualified name (prefix and queue) and the job id; an entry lives exactly
 * as long as its attempt's processor call.
 */

import type { TurnRunner } from '../turn/runner.js';

export interface RunningJob {
  readonly runner: TurnRunner;
  readonly sessionId: string;
  readonly turnId: string;
  /** The attempt's lock token: BullMQ makes it `<worker.id>:<n>`, so it names the worker. */
  readonly token: string | undefined;
}

const running = new Map<string, RunningJob>();

/** Record the attempt; returns the function that forgets it (only it, never a later attempt's entry). */
export function trackRunning(queueQualifiedName: string, jobId: string, job: RunningJob): () => void {
  const key = `${queueQualifiedName}\n${jobId}`;
  running.set(key, job);
  return () => {
    if (running.get(key) === job) running.delete(key);
  };
}

/** The attempt of that job running in this process, if any. */
export function runningHere(queueQualifiedName: string, jobId: string): RunningJob | undefined {
  return running.get(`${queueQualifiedName}\n${jobId}`);
}

/** The attempts of that queue running in this process whose lock token starts with `tokenPrefix`. */
export function runningWith(queueQualifiedName: string, tokenPrefix: string): RunningJob[] {
  const found: RunningJob[] = [];
  for (const [key, job] of running) {
    if (key.startsWith(`${queueQualifiedName}\n`) && job.token?.startsWith(tokenPrefix) === true) found.push(job);
  }
  return found;
}
