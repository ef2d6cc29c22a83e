/**
 * The handshake cells every benchmark suite shares with its worker files: an Int32Array over a
 * SharedArrayBuffer, sent once. Its own module because the main thread must not import a worker's
 * entry, and because the suites speak the same protocol.
 */

/** Set to 1 (and notified) by the task or raw worker once it is where the sample starts. */
export const READY = 0;
/** The raw baselines' "go" cell (who flips it depends on the row). */
export const GO = 1;
/** A cell nobody writes: waiting on it is a plain timed sleep. */
export const SPARE = 2;
export const FLAG_CELLS = 4;

/** A task's argument: its handshake cells. */
export interface FlagsTask {
  flags: Int32Array;
}
