/**
 * The bridge: a cancel made on another thread becomes `token.signal` aborting on the main thread.
 *
 * One `Atomics.waitAsync` per *slab*, on the slab's bridge cell (slot.ts), armed while at least one
 * token of the slab is watched, i.e. its handle has left the thread (a token nobody else can see
 * cannot be cancelled elsewhere, so it needs no bridge). No thread per turn, no timer. A cancel
 * through a handle bumps and notifies the bridge cell after it has woken the slot's sleepers, so
 * the bridge never delays a worker; the bridge then looks at the slab's watched tokens and tells
 * those whose slot reads cancelled. A pending `waitAsync` neither keeps the process alive nor
 * shows in `process.getActiveResourcesInfo()`, so armed bridges are counted (`BridgeCounts`).
 *
 * The bridge knows a token only through `Watched`: where its slot is, and whom to tell. It never
 * writes a token's state; the token decides what a cancel from a slot means (state.ts).
 *
 * A token is unwatched when it retires (a cancelled token stays watched until then: see
 * `TokenState.cancel`). When a slab's last watched token goes, the bridge is disarmed and its
 * waiter resolved at once by a notify of the bridge cell, so no waiter is left behind
 * (`stats().liveBridges` is exact and synchronous).
 */

import type { Slab, SlotRef } from './slab.js';
import { BRIDGE_INDEX } from './slot.js';

/** What the bridge needs of a token. */
export interface Watched {
  readonly slot: SlotRef;
  /** Another thread cancelled this token's slot. Called on the main thread, at most once a wake. */
  cancelFromSlot(): void;
}

/** The registry's count of armed bridges (behind `stats().liveBridges`). */
export interface BridgeCounts {
  bridges: number;
}

interface SlabBridge {
  /** False once disarmed; a wake of a disarmed bridge does nothing. */
  armed: boolean;
  readonly watched: Set<Watched>;
  readonly counts: BridgeCounts;
}

/**
 * The armed bridge of each slab, by slab id (ids are small and dense); a slab with no watched
 * token has none. An array rather than a Map: arming and disarming happen once a pooled turn,
 * and a Map that gains and loses a key every turn costs a measurable share of that turn.
 */
const bridges: (SlabBridge | undefined)[] = [];

/** The handle of `target` is leaving this thread: from now on a cancel may come from elsewhere. */
export function watch(target: Watched, counts: BridgeCounts): void {
  const slab = target.slot.slab;
  let bridge = bridges[slab.id];
  if (bridge === undefined) {
    bridge = { armed: true, watched: new Set(), counts };
    bridges[slab.id] = bridge;
    counts.bridges++;
    waitForCancel(slab, bridge);
  }
  bridge.watched.add(target);
}

/** The main thread cancelled or retired `target`: it needs the bridge no more. Idempotent. */
export function unwatch(target: Watched): void {
  const slab = target.slot.slab;
  const bridge = bridges[slab.id];
  if (bridge === undefined || !bridge.watched.delete(target) || bridge.watched.size > 0) return;
  bridge.armed = false;
  bridges[slab.id] = undefined;
  bridge.counts.bridges--;
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
 * later task), the main thread may have cancelled or retired any watched token (they left the
 * set), disarmed the bridge (the set emptied; a newer bridge may already wait on the same cell),
 * or nothing happened on the main thread at all. So: a disarmed bridge does nothing; otherwise the
 * cell is read *before* the scan and the wait re-armed with that value *after* it, so a cancel that
 * lands during the scan makes the new wait return at once (no missed wake-up), and the signals of
 * this wake abort first. Only tokens still watched whose own generation reads CANCELLED are told;
 * telling a token that is already cancelled changes nothing (`TokenState.cancel` is idempotent), so
 * each signal aborts at most once.
 */
function onWake(slab: Slab, bridge: SlabBridge): void {
  if (!bridge.armed) return;
  const seen = Atomics.load(slab.cells, BRIDGE_INDEX);
  // The set itself, not a copy: telling a target deletes it from the set, which a Set's iterator
  // allows, and a token watched meanwhile (by a listener) is looked at too, which is harmless.
  for (const target of bridge.watched) {
    // The word of its own generation's cancel, nothing else (a later generation reads as retired).
    const slot = target.slot;
    if (Atomics.load(slot.cells, slot.index) === slot.cancelledWord) target.cancelFromSlot();
  }
  if (bridge.armed) waitForCancel(slab, bridge, seen);
}
