/**
 * When to cancel: a moment drawn uniformly over the measured run time, and a wait that reaches it
 * to within a few microseconds. A timer alone fires up to a millisecond or more late, which for a
 * task that runs a few ms would skew every draw toward its end; so the timer takes the wait to
 * just before the moment and a short spin does the rest.
 */

import { sharedNow } from '../../workers/probe-record.js';
import { waitAtMost } from '../base/within.js';

/** Spin for at most this long; wait on a timer before it. */
const SPIN_MS = 1.5;

/** A moment in [0, spanMs). */
export function drawMoment(spanMs: number): number {
  return Math.random() * spanMs;
}

/**
 * Resolve at shared-clock time `at` (workers/probe-record.ts), or as soon as `stopWaiting`
 * settles, whichever is first. True when the moment came.
 */
export async function reach(at: number, stopWaiting: Promise<unknown>): Promise<boolean> {
  let stopped = false;
  const onStop = stopWaiting.then(() => { stopped = true; }, () => { stopped = true; });
  for (;;) {
    const left = at - sharedNow();
    if (stopped) return false;
    if (left <= SPIN_MS) break;
    await waitAtMost(onStop, left - SPIN_MS);
  }
  while (sharedNow() < at) { /* the last stretch: spin (see above) */ }
  return true;
}
