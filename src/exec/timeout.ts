/** The timeout cause: `timeoutMs` after the spawn, the same stop sequence as a cancel. */

import type { Stop } from './abort.js';

/** Returns what clears the timer (the child calls it when it settles). */
export function onTimeout(timeoutMs: number | undefined, stop: Stop): () => void {
  if (timeoutMs === undefined) return () => {};
  const timer = setTimeout(() => stop('timeout'), timeoutMs);
  return () => clearTimeout(timer);
}
