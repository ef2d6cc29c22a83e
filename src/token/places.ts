/**
 * A token's places as another thread needs them: its own slot, and its turn's root slot when the
 * token is a child. What carries them across (the pool's wire, src/pool/protocol.ts) is not this
 * module's business; which slots, and how they are exported, is.
 */

import type { SlotRef } from './slab.js';
import { tokenState, type CancelToken } from './token.js';

/** The token's slot, exported for sleepers on other threads (its cancel then wakes them). */
export function sharedSlot(token: CancelToken): SlotRef {
  return tokenState(token).exportSlot();
}

/**
 * The slot of the token's root, exported for a cancel from another thread only (a worker's
 * `cancelTurn()` trips the whole turn; nothing sleeps on it there); `undefined` for a root token.
 */
export function sharedRootSlot(token: CancelToken): SlotRef | undefined {
  let root = tokenState(token).parent;
  if (root === undefined) return undefined;
  while (root.parent !== undefined) root = root.parent;
  return root.exportSlot(false);
}
