/** The timeout cause: `timeoutMs` after the spawn, the same stop sequence as a cancel. */

import type { Stop } from './abort.js';

export function onTimeout(timeoutMs: number | undefined, lifetime: AbortSignal, stop: Stop): void {
  if (timeoutMs === undefined) return;
  const timer = setTimeout(() => stop('timeout'), timeoutMs);
  lifetime.addEventListener('abort', () => clearTimeout(timer), { once: true });
}
