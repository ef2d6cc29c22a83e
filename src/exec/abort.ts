/**
 * The abort cause: a plain `AbortSignal` given as `options.signal` stops the child when it aborts.
 * (A token's cancel and retirement reach the child through its owner, see exec.ts, the same way
 * they reach a pool task.)
 */

import type { StopCause } from './result.js';

export type Stop = (cause: StopCause, governed?: boolean) => void;

/** Stop on the signal's abort; the listener goes with the child's lifetime. */
export function onAbort(signal: AbortSignal | undefined, lifetime: AbortSignal, stop: Stop): void {
  signal?.addEventListener('abort', () => stop('cancel'), { once: true, signal: lifetime });
}
