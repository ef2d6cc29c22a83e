/**
 * What the suites and their workers agree on (main must not import a worker's entry: it would run
 * it). Clock: `process.hrtime.bigint()`, one monotonic clock for every thread of the process, so a
 * stamp taken on a worker and one taken on main subtract directly.
 */

import type { TokenHandle } from '../../workers/runtime.js';

/** Cells: READY, set by a worker once it is where the sample starts; GO, the raw floors' "go"; SPARE, never written (a timed sleep). */
export const READY = 0;
export const GO = 1;
export const SPARE = 2;

/** A task's argument: its handshake cells. */
export type FlagsTask = { flags: Int32Array };

/** P3: the worker trips the turn after TRIP_AFTER_MS (main is idle by then) and lingers LINGER_MS (its reply cannot come first). */
export const TRIP_AFTER_MS = 2;
export const LINGER_MS = 5;
/** SQ1: iterations between two token polls. */
export const POLL_EVERY = 1000;

/** Main → raw worker (bench/workers/raw.ts, which says what each kind does): one floor sample. */
export type RawCommand =
  | { kind: 'wait' | 'poll' | 'notify'; shape?: boolean }
  | { kind: 'loop'; id: number; loopMs: number; handle?: TokenHandle }
  | { kind: 'cancel'; id: number };

/**
 * Raw worker → main: when it woke / noticed / notified; `ok` false if the wait never blocked (or
 * SQ1's loop ran out first). SQ1: `loopEndedAt`, when its loop returned to the event loop.
 */
export type RawReport = { at: bigint; ok: boolean; sink: number; loopEndedAt?: bigint };
