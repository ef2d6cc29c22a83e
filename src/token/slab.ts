/**
 * Slabs: the SharedArrayBuffers that hold the slots of one registry's live tokens.
 *
 * A slab is `slots + 2` Int32 cells (cells 0 and 1 are the control and bridge cells, see slot.ts). Cells are handed
 * out from a LIFO free list and come back on retire with their generation intact, so the next
 * claim bumps it (slot.ts, invariant 2). When every slab is full a new one is added: there is no
 * cap, and slabs are never removed (a worker may still hold a stale handle into one, and reading
 * a retired cell is how it learns it is stale).
 *
 * Slab ids are unique across all registries of the process, so one pool can serve tokens of
 * several registries and tell their slabs apart by number alone.
 */

import { claimSlot, FIRST_SLOT, retireSlot, setPaused } from './slot.js';
import type { SlabBridge } from './bridge.js';

export interface Slab {
  /** Process-wide unique id; workers look slabs up by it. */
  readonly id: number;
  readonly buffer: SharedArrayBuffer;
  readonly cells: Int32Array;
  /** Free cell indices (LIFO). */
  readonly free: number[];
  /** The main thread's bridge for this slab; `undefined` while no live token's handle has left the thread. */
  bridge: SlabBridge | undefined;
}

/** Where a token's slot lives. */
export interface SlotRef {
  readonly slab: Slab;
  readonly index: number;
  readonly generation: number;
}

let nextSlabId = 1;
const slabsById = new Map<number, Slab>();

/** Every slab of the process by id (the pool sends these to its workers once). */
export function slabById(id: number): Slab | undefined {
  return slabsById.get(id);
}

export class SlabSet {
  readonly slotsPerSlab: number;
  readonly slabs: Slab[] = [];
  /** Slots currently owned by a live token. */
  live = 0;
  #paused = false;
  /** The slab new claims come from; `undefined` until the first claim. */
  #current: Slab | undefined;

  constructor(slotsPerSlab: number) {
    this.slotsPerSlab = slotsPerSlab;
  }

  claim(): SlotRef {
    let slab = this.#current;
    if (slab === undefined || slab.free.length === 0) slab = this.#current = this.#withFreeCell();
    const index = slab.free.pop()!;
    this.live++;
    return { slab, index, generation: claimSlot(slab.cells, index) };
  }

  release(ref: SlotRef): void {
    retireSlot(ref.slab.cells, ref.index, ref.generation);
    ref.slab.free.push(ref.index);
    this.live--;
  }

  get paused(): boolean {
    return this.#paused;
  }

  setPaused(paused: boolean): void {
    this.#paused = paused;
    for (const slab of this.slabs) setPaused(slab.cells, paused);
  }

  #withFreeCell(): Slab {
    for (const slab of this.slabs) if (slab.free.length > 0) return slab;
    return this.#add();
  }

  #add(): Slab {
    const buffer = new SharedArrayBuffer((this.slotsPerSlab + FIRST_SLOT) * Int32Array.BYTES_PER_ELEMENT);
    const cells = new Int32Array(buffer);
    // Highest index first so pop() hands out 2, 3, 4, ... (easier to read in a debugger).
    const free: number[] = [];
    for (let i = this.slotsPerSlab + FIRST_SLOT - 1; i >= FIRST_SLOT; i--) free.push(i);
    const slab: Slab = { id: nextSlabId++, buffer, cells, free, bridge: undefined };
    if (this.#paused) setPaused(cells, true);
    this.slabs.push(slab);
    slabsById.set(slab.id, slab);
    return slab;
  }
}
