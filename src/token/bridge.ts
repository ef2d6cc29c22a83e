/**
 * The bridge: a slot change made on any thread becomes `token.signal` aborting on the main thread.
 *
 * One `Atomics.waitAsync` per token whose handle has left this thread (a token nobody else can
 * see cannot be cancelled elsewhere, so it needs no bridge). No thread per turn, no timer. A
 * pending `waitAsync` neither keeps the process alive nor shows in
 * `process.getActiveResourcesInfo()`, so every armed bridge is counted in `Counters.bridges`.
 *
 * A bridge is released exactly once, by whichever comes first:
 *   - the main thread cancels or retires the token (`release`, synchronous: the notify that
 *     follows already resolved the engine's waiter, so nothing is pending any more);
 *   - the wait resolves because another thread moved the slot (`onWake`).
 */

import { pack, readState, STATE_CANCELLED, STATE_RUNNING } from './slot.js';
import type { TokenState } from './state.js';

export interface Bridge {
  /** False once released; a wake of a released bridge does nothing. */
  armed: boolean;
}

/** Arm the bridge of `state` if it has none. Idempotent. */
export function arm(state: TokenState): void {
  if (state.bridge !== undefined || state.cancelled || state.retired) return;
  const bridge: Bridge = { armed: true };
  state.bridge = bridge;
  state.counters.bridges++;
  waitForChange(state, bridge);
}

function waitForChange(state: TokenState, bridge: Bridge): void {
  const { slab, index, generation } = state.slot;
  const result = Atomics.waitAsync(slab.cells, index, pack(generation, STATE_RUNNING));
  if (result.async) result.value.then(() => onWake(state, bridge));
  else onWake(state, bridge);
}

/** Release without firing (main-thread cancel or retire). */
export function release(state: TokenState): void {
  const bridge = state.bridge;
  if (bridge === undefined || !bridge.armed) return;
  bridge.armed = false;
  state.counters.bridges--;
}

/**
 * The one race of the bridge. Between the notify that resolved this wait and this callback
 * running (a later task), the main thread may have cancelled the token (then it already released
 * the bridge), retired it (released too; and the cell may already belong to a new generation), or
 * nothing at all happened on the main thread. Only a bridge still armed, whose own generation
 * reads CANCELLED, fires; it fires through `cancelFromSlot`, which is a no-op on a token that is
 * already cancelled or retired, so the signal aborts at most once. A wake that finds the slot still
 * RUNNING (a notify without a change) waits again.
 */
function onWake(state: TokenState, bridge: Bridge): void {
  if (!bridge.armed) return;
  const seen = readState(state.slot.slab.cells, state.slot.index, state.slot.generation);
  if (seen === STATE_RUNNING) return waitForChange(state, bridge);
  release(state);
  if (seen === STATE_CANCELLED) state.cancelFromSlot();
}
