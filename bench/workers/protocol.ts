/**
 * What the suites and their worker files agree on. A module of its own because the main thread
 * must not import a worker's entry (it would run it).
 *
 * Handshake cells: an Int32Array over a SharedArrayBuffer (`flagCells()` in harness.ts). Clock:
 * `process.hrtime.bigint()`, libuv's monotonic clock, one for every thread of the process, so a
 * stamp taken on a worker and one taken on main subtract directly, at ns resolution.
 */

import type { TokenHandle } from '../../workers/runtime.js';

/** Set to 1 (and notified) by the task or raw worker once it is where the sample starts. */
export const READY = 0;
/** The raw floors' "go" cell (flipped by main in P1/P2/R*, by the worker in P3). */
export const GO = 1;
/** A cell nobody writes: waiting on it is a plain timed sleep. */
export const SPARE = 2;

/** A task's argument: its handshake cells. */
export type FlagsTask = { flags: Int32Array };

/** P3: the worker waits this long before it trips the turn, so main is idle in its event loop. */
export const TRIP_AFTER_MS = 2;
/** P3: the worker stays this long after the trip, so its reply cannot reach main first. */
export const LINGER_MS = 5;

/**
 * Main → raw worker (bench/workers/raw.ts): one floor sample. `shape`: after noticing, throw and
 * catch a pre-built Error before the stamp — the least a cancelled check that must throw can do.
 */
export interface RawCommand {
  kind: 'wait' | 'poll' | 'notify' | 'sleep' | 'slot';
  shape?: boolean;
  /** `sleep`, `slot`: the turn's handle. */
  handle?: TokenHandle;
  /** `slot`: the slot's running word (what the wait expects). */
  running?: number;
}

/** Raw worker → main: when it woke / noticed / notified; `ok` false if the wait never blocked. */
export type RawReport = { at: bigint; ok: boolean; sink: number };

/** SQ1 (bench/workers/sync-loop.ts): run one loop of `loopMs` ms; in mode 'message' only a cancel message stops it, in 'token' it polls `handle`. */
export type RunMessage = { kind: 'run'; id: number; mode: 'message' | 'token'; loopMs: number; handle?: TokenHandle };
/** SQ1: the status-quo cancel, a message. */
export type CancelMessage = { kind: 'cancel'; id: number };

/** SQ1: worker → main. Stamps are `performance.timeOrigin + performance.now()` (shared by both threads). */
export type LoopReport =
  | { kind: 'started'; id: number }
  | { kind: 'noticed'; id: number; at: number; loopEndedAt: number; sink: number }
  /** The loop ran out before the token was cancelled: the sample is void. */
  | { kind: 'missed'; id: number };

/** SQ1: iterations between two token polls. */
export const POLL_EVERY = 1000;
