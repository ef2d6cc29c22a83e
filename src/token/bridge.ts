/**
 * The bridge: a cancel made on another thread becomes `token.signal` aborting on the main thread.
 *
 * One `Atomics.waitAsync` per *slab*, on the slab's bridge cell (slot.ts), armed while at least one
 * live token of the slab has exported its handle (a token nobody else can see cannot be cancelled
 * elsewhere, so it needs no bridge). No thread per turn, no timer. A cancel through a handle bumps
 * and notifies the bridge cell after it has woken the slot's sleepers, so the bridge never delays a
 * worker; the bridge then looks at the slab's exported tokens and folds in those whose slot reads
 * cancelled. A pending `waitAsync` neither keeps the process alive nor shows in
 * `process.getActiveResourcesInfo()`, so armed bridges are counted in `Counters.bridges`.
 *
 * A token leaves its slab's exported set when the main thread cancels or retires it (`release`).
 * When the set empties the bridge is disarmed and its waiter resolved at once by a notify of the
 * bridge cell, so no waiter is left behind (`stats().liveBridges` is exact and synchronous).
 */

import { BRIDGE_INDEX, readState, STATE_CANCELLED } from './slot.js';
import type { Slab } from './slab.js';
import type { Counters, TokenState } from './state.js';

export interface SlabBridge {
  /** False once disarmed; a wake of a disarmed bridge does nothing. */
  armed: boolean;
  readonly exported: Set<TokenState>;
  readonly counters: Counters;
}

/** The handle of `state` is about to leave this thread. Idempotent. */
export function arm(state: TokenState): void {
  if (state.exported || state.cancelled || state.retired) return;
  state.exported = true;
  const slab = state.slot.slab;
  if (slab.bridge === undefined) {
    slab.bridge = { armed: true, exported: new Set(), counters: state.counters };
    state.counters.bridges++;
    waitForCancel(slab, slab.bridge);
  }
  slab.bridge.exported.add(state);
}

/** The main thread cancelled or retired `state`: it needs the bridge no more. */
export function release(state: TokenState): void {
  if (!state.exported) return;
  state.exported = false;
  const slab = state.slot.slab;
  const bridge = slab.bridge!;
  bridge.exported.delete(state);
  if (bridge.exported.size > 0) return;
  bridge.armed = false;
  slab.bridge = undefined;
  bridge.counters.bridges--;
  // Resolve the pending waiter now, so a disarmed bridge leaves nothing queued in the engine.
  Atomics.notify(slab.cells, BRIDGE_INDEX);
}

function waitForCancel(slab: Slab, bridge: SlabBridge, seen = Atomics.load(slab.cells, BRIDGE_INDEX)): void {
  const result = Atomics.waitAsync(slab.cells, BRIDGE_INDEX, seen);
  if (result.async) result.value.then(() => onWake(slab, bridge));
  else queueMicrotask(() => onWake(slab, bridge));
}

/**
 * The one race of the bridge. Between the notify that resolved this wait and this callback (a
 * later task), the main thread may have cancelled or retired any exported token (they left the
 * set), disarmed the bridge (the set emptied; a newer bridge may already wait on the same cell),
 * or nothing happened on the main thread at all. So: a disarmed bridge does nothing; otherwise the
 * cell is read *before* the scan and the wait re-armed with that value *after* it, so a cancel that
 * lands during the scan makes the new wait return at once (no missed wake-up), and the signals of
 * this wake abort first. Only tokens still exported whose own generation reads CANCELLED are
 * folded in, through `cancelFromSlot`, a no-op on a token already cancelled or retired — so each
 * signal aborts at most once.
 */
function onWake(slab: Slab, bridge: SlabBridge): void {
  if (!bridge.armed) return;
  const seen = Atomics.load(slab.cells, BRIDGE_INDEX);
  for (const state of [...bridge.exported]) {
    const { index, generation } = state.slot;
    if (readState(slab.cells, index, generation) === STATE_CANCELLED) state.cancelFromSlot();
  }
  if (bridge.armed) waitForCancel(slab, bridge, seen);
}
