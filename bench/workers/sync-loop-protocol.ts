/**
 * The messages between the status-quo suite and its loop worker (sync-loop.ts). A module of its
 * own because the main thread must not import the worker's entry (it would run it).
 */

import type { TokenHandle } from '../../workers/runtime.js';

/** Main → worker: run one loop. */
export interface RunMessage {
  kind: 'run';
  id: number;
  /** 'message': only a CancelMessage can stop it; 'token': it polls `handle`. */
  mode: 'message' | 'token';
  /** Loop length in ms (timed, not counted, so a slow machine does not stretch the sample). */
  loopMs: number;
  handle?: TokenHandle;
}

/** Main → worker, mode 'message': the status-quo cancel. */
export interface CancelMessage {
  kind: 'cancel';
  id: number;
}

/** Worker → main. */
export type Report =
  | { kind: 'started'; id: number }
  /**
   * `at`: when the cancel was noticed; `loopEndedAt`: when the loop ended (a status-quo cancel
   * posted after it is void). `sink` keeps the loop's arithmetic observable to the JIT.
   */
  | { kind: 'noticed'; id: number; at: number; loopEndedAt: number; sink: number }
  /** The loop ran out before the token was cancelled: the sample is void. */
  | { kind: 'missed'; id: number };

export const POLL_EVERY = 1000;
