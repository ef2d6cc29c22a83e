/**
 * What the pool suite (bench/pool.bench.ts) and its worker files (pool-tasks.ts, pool-raw.ts)
 * agree on. A module of its own because the main thread must not import a worker's entry.
 *
 * Clock: every timestamp is `process.hrtime.bigint()`, i.e. libuv's monotonic clock in ns. It is
 * one clock for every thread of the process, so a stamp taken on a worker and one taken on the
 * main thread subtract directly, at ns resolution (`performance.timeOrigin + performance.now()`
 * would also work but rounds to ~0.24 µs at today's epoch).
 */

/** The shared handshake cells; GO is flipped by main (P1, P2) or by the worker (P3). */
export { READY, GO, SPARE, FLAG_CELLS, type FlagsTask } from './handshake.js';

/**
 * P3: how long the worker waits before it trips the turn, so the main thread is idle in its event
 * loop when the wake arrives (otherwise the figure would include whatever main was still doing).
 */
export const TRIP_AFTER_MS = 2;

/**
 * P3: how long the worker stays after the wake-up before it answers, so its reply message cannot
 * reach the main thread first (a TurnPool result folds the slot in too, which would fire the
 * signal without the bridge).
 */
export const LINGER_MS = 5;

/**
 * Main → raw worker: one baseline sample (`flags` came once, in workerData). `withError`: build a
 * plain `new Error()` after noticing and stamp after it — not a baseline, a measure of how much of
 * a fullstop figure is just the cost of the error object a cancelled check must throw.
 */
export interface RawCommand {
  kind: 'wait' | 'poll' | 'notify';
  withError?: boolean;
}

/** Raw worker → main: when it woke / noticed / notified; `ok` false if the wait never blocked. */
export interface RawReport {
  at: bigint;
  ok: boolean;
  sink: number;
}
