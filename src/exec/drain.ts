/**
 * Draining the child's output (output.ts collects it as it arrives, so a stop keeps what was
 * written before it) with a bound after a stop.
 *
 * Why a bound: with piped stdio, the read end stays open while any process holds the write end,
 * and a grandchild that escaped every sweep (a double-forked daemon) may hold it forever. A
 * promise of the whole output (execa's, say) hangs in exactly that case; after a stop the streams
 * get `DRAIN_BOUND_MS` to close, then are destroyed.
 */

import type { Output } from './output.js';
import { within, waitAtMost } from '../base/within.js';

/** How long the pipes may stay open once a stop has ended the tree. */
export const DRAIN_BOUND_MS = 200;

/**
 * How long the pipes are read after the child exited, when no stop began: a background process
 * the command started (`sleep 30 &`) may hold them open for as long as it runs. Past it the call
 * settles with what arrived, `pipesHeldOpen: true` (docs/exec.md, "Faults").
 */
export const PIPES_AFTER_EXIT_MS = 200;

/** Both streams closed, however long it takes (no stop: the output is what the caller waits for). */
export function allClosed(outputs: readonly Output[]): Promise<void> {
  return Promise.all(outputs.map((o) => o.closed)).then(() => undefined);
}

/**
 * After the child's exit: true once both streams have closed; false if they are still open
 * `boundMs` later, with the I/O already arrived by then read first (the timer can fire in the same
 * loop turn as the reads it should wait for, after a long block of the event loop), or once `stop`
 * resolves (the stop's drain bounds the rest).
 */
export function closedAfterExit(outputs: readonly Output[], boundMs: number, stop: Promise<void>): Promise<boolean> {
  return within(Promise.race([allClosed(outputs).then(() => true), stop.then(() => false)]), boundMs, () => afterPendingReads().then(() => false));
}

/** Two turns of the loop: the poll phase between them reads what the pipes hold, and their end. */
function afterPendingReads(): Promise<void> {
  return new Promise((resolve) => setImmediate(() => setImmediate(resolve)));
}

/** Wait up to `boundMs` for the streams to close, then destroy the ones still open. */
export async function drain(outputs: readonly Output[], boundMs: number): Promise<void> {
  await waitAtMost(allClosed(outputs), boundMs);
  for (const output of outputs) output.destroy();
  await allClosed(outputs);
}
