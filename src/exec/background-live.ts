/**
 * Which turns started background processes that are still alive, so a stop's marker says "may still
 * be running" only when one is (docs/runner.md, "What the history tells the model"). A background
 * process belongs to no turn (background.ts): this only remembers which turn started it — the
 * token given to `spawnBackground`, else the ambient one (`activeToken()`) — until it has settled.
 *
 * Invariants:
 * 1. A turn's count is the number of its background processes not yet settled; a turn with none
 *    has no entry, so the map holds only turns with a live process (nothing grows with turns).
 * 2. The count goes up before `spawnBackground` returns and down before its `exited` resolves
 *    (`Child.onDone`), so a caller that awaited `exited` is never counted as still running.
 */

import type { CancelToken } from '../token/token.js';

/** Live background processes by turn key (invariant 1). */
const live = new Map<string, number>();

/** One key for a session's turn: JSON, since an id may hold any character (a separator could be in it). */
function keyOf(sessionId: string, turnId: string | undefined): string {
  return JSON.stringify([sessionId, turnId ?? null]);
}

/**
 * Count a background process started under `token`'s turn until the returned function is called
 * (once, when it has settled). Without a token it belongs to no turn: nothing is counted.
 */
export function countBackground(token: CancelToken | undefined): () => void {
  if (token === undefined) return () => {};
  const key = keyOf(token.sessionId, token.turnId);
  live.set(key, (live.get(key) ?? 0) + 1);
  let counted = true;
  return () => {
    if (!counted) return;
    counted = false;
    const left = live.get(key)! - 1;
    if (left === 0) live.delete(key);
    else live.set(key, left);
  };
}

/** True when a background process started by turn `turnId` of `sessionId` has not settled yet. */
export function hasLiveBackground(sessionId: string, turnId: string): boolean {
  return live.has(keyOf(sessionId, turnId));
}
