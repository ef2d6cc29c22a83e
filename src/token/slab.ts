/**
 * Slabs: the SharedArrayBuffers that hold the slots of one registry's live tokens.
 *
 * A slab is `slots + 2` Int32 cells (cells 0 and 1 are the control and bridge cells, see slot.ts).
 * Cells are handed out from a LIFO free list and come back on retire with their generation
 * intact, so the next claim bumps it (slot.ts, invariant 2). When every slab is full a new one is
 * added: there is no cap on live tokens, and slabs are never removed (a worker may still hold a
 * stale handle into one, and reading a retired cell is how it learns it is stale).
 *
 * Slab ids are unique across all registries of the process, so one pool can serve tokens of
 * several registries and tell their slabs apart by number alone.
 *
 * This module knows cells and free lists only: which token holds a cell, and whether anyone
 * watches it from another thread, is known above it (state.ts, bridge.ts).
 */

import { claimSlot, FIRST_SLOT, pack, retireSlot, setPaused, STATE_CANCELLED, STATE_RUNNING } from './slot.js';

/** One SharedArrayBuffer of slots. */
export interface Slab {
  /** Process-wide unique id; workers look slabs up by it. */
  readonly id: number;
  readonly buffer: SharedArrayBuffer;
  readonly cells: Int32Array;
  /** Free cell indices (LIFO). */
  readonly free: number[];
}

/**
 * Where a token's slot lives, and what a cancel needs to flip it with no other object
 * to fetch (`CancelToken.cancel` flips through it before it calls anything).
 */
export interface SlotRef {
  readonly slab: Slab;
  readonly index: number;
  readonly generation: number;
  /** `slab.cells`. */
  readonly cells: Int32Array;
  /** The cell's word while this generation runs, and once it is cancelled (slot.ts, invariant 1). */
  readonly runningWord: number;
  readonly cancelledWord: number;
  /**
   * True while a cancel should wake the slot the moment it flips it: another thread can sleep on
   * it and the token has no children to flip first. This module never reads it; the token that
   * holds the slot (state.ts) alone writes it.
   */
  wakeOnFlip: boolean;
}

/**
 * The most slots one slab may hold. A full slab is never a limit (another is added), so a larger
 * slab buys nothing but one huge allocation at the first claim: 2^20 slots is a 4 MiB buffer.
 */
export const MAX_SLOTS_PER_SLAB = 2 ** 20;

let nextSlabId = 1;
const slabsById = new Map<number, Slab>();

/** Every slab of the process by id (the pool sends these to its workers once). */
export function slabById(id: number): Slab | undefined {
  return slabsById.get(id);
}

/** The slabs of one registry. */
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

  /** A free cell, moved to RUNNING with the next generation. */
  claim(): SlotRef {
    let slab = this.#current;
    if (slab === undefined || slab.free.length === 0) slab = this.#current = this.#withFreeCell();
    const index = slab.free.pop()!;
    this.live++;
    const generation = claimSlot(slab.cells, index);
    return {
      slab, index, generation, cells: slab.cells,
      runningWord: pack(generation, STATE_RUNNING), cancelledWord: pack(generation, STATE_CANCELLED), wakeOnFlip: false,
    };
  }

  /** Move the cell to RETIRED (waking its sleepers) and put it back on the free list. Once per claim. */
  retireAndFree(ref: SlotRef): void {
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
    const slab: Slab = { id: nextSlabId++, buffer, cells, free };
    if (this.#paused) setPaused(cells, true);
    this.slabs.push(slab);
    slabsById.set(slab.id, slab);
    return slab;
  }
}
