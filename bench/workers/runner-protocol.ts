/**
 * What the runner suite (bench/runner.bench.ts) and its worker files (runner-tasks.ts,
 * runner-raw.ts) agree on. A module of its own because the main thread must not import a worker's
 * entry.
 */

/** `flags` cells (an Int32Array over a SharedArrayBuffer the task or the raw worker gets). */
export const READY = 0;
/** The raw worker's "go" cell: main stores 1 and notifies it (the raw floor's wake-up). */
export const GO = 1;
export const FLAG_CELLS = 4;

/** A pool task's argument: its handshake cells. */
export interface FlagsTask {
  flags: Int32Array;
}

/** Raw worker → main, once it woke from `Atomics.wait`: `ok` false if the wait never blocked. */
export interface RawWake {
  ok: boolean;
}
