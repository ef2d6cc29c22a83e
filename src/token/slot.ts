// Runs on both threads: main (src/token/) and workers (workers/), so both agree on every bit.
/**
 * The slot encoding: one Int32 cell of a SharedArrayBuffer per live token.
 *
 * It holds no state of its own; it only reads and moves cells, and imports nothing but errors.ts
 * (which runs on both threads too).
 *
 * Invariants
 *
 * 1. A cell packs `generation << 2 | state` in one Int32, so one `Atomics.compareExchange`
 *    moves generation and state together. A holder of generation g can only ever CAS from a
 *    word carrying g: once the cell moves to g+1 every stale CAS fails (no ABA within 2^30 reuses
 *    of one cell — at a million turns a second on one cell that is 18 minutes; in practice a cell
 *    is reused far less often because the free list is LIFO over the whole slab).
 * 2. Transitions (who may move a cell from which state to which):
 *      RUNNING(g)   -> CANCELLED(g)  any thread holding (index, g)      [tripSlot, cancelSlotFromHandle]
 *      RUNNING(g)   -> RETIRED(g)    the owning main thread only        [sealSlot, retireSlot]
 *      CANCELLED(g) -> RETIRED(g)    the owning main thread only        [retireSlot]
 *      RETIRED(g)   -> RUNNING(g+1)  the owning main thread only, when the slab hands the cell
 *                                    to a new token                     [claimSlot]
 *    Nothing else moves a cell. In particular CANCELLED never goes back to RUNNING, which is why
 *    a late stop can never affect the next owner: the next owner has a new generation.
 * 3. A RETIRED cell is free. Reading a cell whose generation differs from the handle's reads as
 *    RETIRED for that handle, so a stale handle never sees the new owner's state as its own.
 * 4. Memory ordering: every write is an Atomics read-modify-write (sequentially consistent), and
 *    every write that a sleeper may wait on is followed by `Atomics.notify` on that cell and by a
 *    bump of the slab's control cell (index 0, see below), notified while the slab is paused.
 *    (A slot no other thread can wait on, because no handle that could has left the main thread,
 *    has no sleeper: state.ts skips its wake.)
 *    Readers use `Atomics.load`.
 *
 * Control cell: index 0 of every slab is not a slot. Bit 0 is the registry's pause flag; the
 * upper bits are a wake sequence bumped by every cancel and retire in that slab that another
 * thread may be waiting for (a cancel of a slot no other thread can wait on bumps nothing). A
 * paused worker waits on the control cell with the value it last read, so a cancel that lands
 * between its slot check and its wait changes the control word and the wait returns at once (no
 * missed wake-up). See `waitWhilePaused`.
 *
 * Bridge cell: index 1 is a counter bumped (and notified) only by a cancel made through a handle
 * (`cancelSlotFromHandle`, i.e. from another thread). The main thread's bridge waits on it with
 * `Atomics.waitAsync`, never on a slot: an async waiter queued on a slot would be woken first by
 * every notify of that slot and delay the worker sleeping behind it (a measurable share of a
 * cancel's wake-up, bench row P1).
 */

import { describe } from '../errors.js';

export const STATE_RUNNING = 1;
export const STATE_CANCELLED = 2;
export const STATE_RETIRED = 3;
export type SlotState = typeof STATE_RUNNING | typeof STATE_CANCELLED | typeof STATE_RETIRED;

const STATE_MASK = 0b11;
const GENERATION_SHIFT = 2;
/** Generations wrap at 2^30 (the upper 30 bits of the word). */
export const GENERATION_MODULO = 1 << 30;

/** Index of the control cell in every slab. */
export const CONTROL_INDEX = 0;
/** Index of the bridge cell in every slab. */
export const BRIDGE_INDEX = 1;
/** The first cell that is a slot. */
export const FIRST_SLOT = 2;
const PAUSE_BIT = 1;
const WAKE_STEP = 2;

/**
 * A structured-clonable reference to one token's slot, for other threads (`token.handle`, read
 * by `tokenFromHandle` in `fullstop/worker`).
 */
export interface TokenHandle {
  /** The slab the slot lives in. */
  readonly buffer: SharedArrayBuffer;
  /** The slot's Int32 index in `buffer`. */
  readonly index: number;
  /** The generation of the token that owns the slot; any other generation reads as retired. */
  readonly generation: number;
}

export function pack(generation: number, state: SlotState): number {
  return ((generation << GENERATION_SHIFT) | state) | 0;
}

export function generationOf(word: number): number {
  return (word >>> GENERATION_SHIFT) % GENERATION_MODULO;
}

export function stateOf(word: number): SlotState {
  return (word & STATE_MASK) as SlotState;
}

/** The state as seen by the holder of `generation` (invariant 3). */
export function readState(cells: Int32Array, index: number, generation: number): SlotState {
  const word = Atomics.load(cells, index);
  return generationOf(word) === generation ? stateOf(word) : STATE_RETIRED;
}

/**
 * Wake everyone who may be sleeping on this slot or on the slab's control cell (invariant 4).
 * The slot's sleepers first: the slot's word has already changed, so they need nothing more, and
 * a worker blocked in `sleep()` is the wake a cancel is timed by. The control word only has to
 * change before its own notify (a paused waiter compares against it, `waitWhilePaused`).
 * Waking a slot whose word did not change is harmless: its sleepers find their word and sleep on.
 */
export function wakeSlot(cells: Int32Array, index: number): void {
  Atomics.notify(cells, index);
  bumpControl(cells);
}

/**
 * Bump the control cell's wake sequence; notify its sleepers only if the pause bit was set. Only
 * `waitWhilePaused` sleeps on the control cell, and only on a word with the pause bit; clearing
 * the bit notifies every such sleeper (`setPaused`), so a bump that finds the bit clear has nobody
 * to wake and skips the notify, which would come right after the slot's (a notify there, the
 * bridge's, was measured to delay the worker just woken: see `TokenState.cancel`; this one was
 * not measured on its own).
 */
export function bumpControl(cells: Int32Array): void {
  if ((Atomics.add(cells, CONTROL_INDEX, WAKE_STEP) & PAUSE_BIT) !== 0) Atomics.notify(cells, CONTROL_INDEX);
}

/**
 * RUNNING(g) -> CANCELLED(g), waking nobody: the caller owes a `wakeSlot` of this cell (invariant
 * 4). Split from the wake so that a cancel of a subtree can flip every slot before its first
 * notify: a notify costs far more than a compareExchange, and a worker polling a descendant's
 * slot sees the flip the moment it lands. Returns true if this call moved the cell, false if it
 * was already cancelled, retired, or handed to a later generation.
 */
export function tripSlot(cells: Int32Array, index: number, runningWord: number, cancelledWord: number): boolean {
  return Atomics.compareExchange(cells, index, runningWord, cancelledWord) === runningWord;
}

/**
 * RUNNING(g) -> RETIRED(g) by compareExchange, at the start of a retire. Only the owning main
 * thread calls this. It closes the retire race: without it, a cancel from another thread
 * could land after the owner last read the cell and before `retireSlot` stores RETIRED, and that
 * store would erase a cancel whose caller was told `true`. After the seal, a concurrent
 * cancel either landed first (the cell reads CANCELLED(g) and the owner folds it in) or fails.
 * Wakes nobody: `retireSlot` follows in the same synchronous retire and notifies.
 */
export function sealSlot(cells: Int32Array, index: number, generation: number): void {
  Atomics.compareExchange(cells, index, pack(generation, STATE_RUNNING), pack(generation, STATE_RETIRED));
}

/**
 * The cancel of one slot by a holder of a handle, which may be on any thread: the owning main
 * thread is told through the bridge cell (after the slot's own sleepers were woken).
 */
export function cancelSlotFromHandle(cells: Int32Array, index: number, runningWord: number, cancelledWord: number): boolean {
  if (!tripSlot(cells, index, runningWord, cancelledWord)) return false;
  // `wakeSlot` with the bridge put before the control cell: the slot's sleepers first, then the main
  // thread (whose signal is what a cancel from here is waited for), paused waiters last.
  Atomics.notify(cells, index);
  Atomics.add(cells, BRIDGE_INDEX, 1);
  Atomics.notify(cells, BRIDGE_INDEX);
  bumpControl(cells);
  return true;
}

/** RUNNING(g) | CANCELLED(g) -> RETIRED(g). Only the owning main thread calls this. */
export function retireSlot(cells: Int32Array, index: number, generation: number): void {
  Atomics.store(cells, index, pack(generation, STATE_RETIRED));
  wakeSlot(cells, index);
}

/** RETIRED(g) -> RUNNING(g+1): the new owner's generation. Only the owning main thread calls this. */
export function claimSlot(cells: Int32Array, index: number): number {
  const generation = (generationOf(Atomics.load(cells, index)) + 1) % GENERATION_MODULO;
  Atomics.store(cells, index, pack(generation, STATE_RUNNING));
  return generation;
}

export function isPaused(cells: Int32Array): boolean {
  return (Atomics.load(cells, CONTROL_INDEX) & PAUSE_BIT) !== 0;
}

export function setPaused(cells: Int32Array, paused: boolean): void {
  if (paused) Atomics.or(cells, CONTROL_INDEX, PAUSE_BIT);
  else Atomics.and(cells, CONTROL_INDEX, ~PAUSE_BIT);
  Atomics.notify(cells, CONTROL_INDEX);
}

/**
 * Block while the slab's registry is paused, returning early as soon as the slot leaves RUNNING
 * for this generation. The caller re-checks the slot afterwards.
 *
 * The control word is read *before* the slot: a cancel after that read bumps the wake sequence,
 * so `Atomics.wait(control, seen)` returns 'not-equal' instead of sleeping through it.
 */
export function waitWhilePaused(cells: Int32Array, index: number, generation: number): void {
  for (;;) {
    const seen = Atomics.load(cells, CONTROL_INDEX);
    if ((seen & PAUSE_BIT) === 0) return;
    if (readState(cells, index, generation) !== STATE_RUNNING) return;
    Atomics.wait(cells, CONTROL_INDEX, seen);
  }
}

/**
 * Sleep up to `ms` on the slot while it holds `running` (the RUNNING word of the caller's
 * generation). Returns the word that ended the sleep, or `running` when the time ran out; the
 * caller tells a cancel from a retire (or a later generation, which reads as retired: invariant 3)
 * by comparing words, which it holds already. Spurious wakes (a notify on an unchanged word) loop.
 */
export function sleepOnSlot(cells: Int32Array, index: number, running: number, ms: number): number {
  let word = Atomics.load(cells, index);
  if (word !== running) return word;
  const deadline = performance.now() + ms;
  for (;;) {
    const left = deadline - performance.now();
    if (left <= 0) return running;
    Atomics.wait(cells, index, running, left);
    word = Atomics.load(cells, index);
    if (word !== running) return word;
  }
}

/** Validate a handle that arrived from elsewhere; returns its cells view. */
export function cellsOfHandle(handle: TokenHandle): Int32Array {
  if (handle === null || typeof handle !== 'object') {
    throw new TypeError(`handle: expected a TokenHandle { buffer, index, generation }, got ${describe(handle)}`);
  }
  const { buffer, index, generation } = handle;
  if (!(buffer instanceof SharedArrayBuffer)) {
    throw new TypeError(`handle.buffer: expected a SharedArrayBuffer, got ${describe(buffer)}`);
  }
  const length = buffer.byteLength / Int32Array.BYTES_PER_ELEMENT;
  if (!Number.isInteger(index) || index < FIRST_SLOT || index >= length) {
    throw new RangeError(`handle.index: expected an integer from ${FIRST_SLOT} to ${length - 1}, got ${describe(index)}`);
  }
  if (!Number.isInteger(generation) || generation < 0 || generation >= GENERATION_MODULO) {
    throw new RangeError(`handle.generation: expected an integer from 0 to ${GENERATION_MODULO - 1}, got ${describe(generation)}`);
  }
  return new Int32Array(buffer);
}
