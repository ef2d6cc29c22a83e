/**
 * What the runner suite (bench/runner.bench.ts) and its worker files (runner-tasks.ts,
 * runner-raw.ts) agree on. A module of its own because the main thread must not import a worker's
 * entry.
 */

/** The shared handshake cells; main stores 1 into GO and notifies it (the raw floor's wake-up). */
export { READY, GO, FLAG_CELLS, type FlagsTask } from './handshake.js';

/** Raw worker → main, once it woke from `Atomics.wait`: `ok` false if the wait never blocked. */
export interface RawWake {
  ok: boolean;
}
