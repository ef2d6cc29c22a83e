/**
 * The cancel cause: the token's abort, a plain signal's abort. (The token's retirement is the
 * owner's `onRetire`, see exec.ts: a retired token does not abort.)
 */

import { isStopGoverned } from '../token/owners.js';
import type { CancelToken } from '../token/token.js';
import type { StopCause } from './result.js';

export type Stop = (cause: StopCause, governed?: boolean) => void;

/**
 * Stop on the token's or the signal's abort. Whose grace (DESIGN.md §2) is decided at the moment
 * of the abort: a runner stop marks the tree governed before it cancels the token.
 */
export function onCancel(token: CancelToken | undefined, signal: AbortSignal | undefined, lifetime: AbortSignal, stop: Stop): void {
  token?.signal.addEventListener('abort', () => stop('cancel', isStopGoverned(token)), { once: true, signal: lifetime });
  signal?.addEventListener('abort', () => stop('cancel'), { once: true, signal: lifetime });
}
