/**
 * The abort cause: a plain `AbortSignal` given as `options.signal` stops the child when it aborts.
 * (A token's cancel and retirement reach the child through its owner, see exec.ts, the same way
 * they reach a pool task.)
 */

import type { StopCause } from './result.js';

export type Stop = (cause: StopCause, governed?: boolean) => void;

/** Stop on the signal's abort; returns what removes the listener (the child calls it when it settles). */
export function onAbort(signal: AbortSignal | undefined, stop: Stop): () => void {
  if (signal === undefined) return () => {};
  const listener = () => stop('cancel');
  signal.addEventListener('abort', listener, { once: true });
  return () => signal.removeEventListener('abort', listener);
}
