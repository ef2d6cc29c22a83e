/**
 * The wire between `TurnPool` (main thread) and its worker entry (workers/pool-task.ts): the one
 * module that writes and reads it. The main side encodes payloads and attaches buffers, the
 * worker decodes; neither knows a place's index.
 *
 * Per task only small integers travel: `[task, slabId, index, generation]`, the cell of the
 * task's token, then the turn's root `[..., rootSlabId, rootIndex, rootGeneration]` when the
 * task's token is a child (so `cancelTurn()` in the worker trips the whole turn, not just the
 * task's child token). A worker keeps every slab buffer it has been sent, by id. The pool
 * remembers, per worker thread, which slabs it has sent there; when the load balancer hands a task
 * to a thread that has not seen one of its slabs, the buffers ride along once, appended after the
 * last place (`buffersAt`; the payload is cloned only when piscina posts it, right after the
 * balancer chose). So a buffer crosses to each worker once, the common path carries no
 * SharedArrayBuffer (cloning one into every payload costs throughput), and no control signal ever
 * travels in text that a task could also write (an error message).
 *
 * Small integers, never a hole. Each place is below 2^30 (an index is below a slab's size, a
 * generation below `GENERATION_MODULO`, slab ids count up from 1, one a slab), so V8 keeps every
 * one unboxed (a Smi) on both threads. A number packing two of them would be 2^31 or more, so a
 * heap number on both: the worker rebuilds every cloned array with generic elements, and main's
 * payloads have them too once a buffer has been appended to one (it stores an array there), so
 * that is an allocation a task on each side (test/pool-wire.test.ts counts boxed places). The length says root or child (`hasRootPlaces`). The buffers are
 * an append, at the payload's length: writing past the end would leave holes, and V8 then makes
 * every later array of the same literal holey too (its allocation site learns the elements kind)
 * and clones a holey array in its slow, sparse format, so every payload of the pool would pay for
 * the few that carried buffers.
 *
 * A task run with no token at all travels as the task itself, exactly as piscina sends it (a custom
 * task queue sees the caller's task, `move()` and transfer lists are piscina's own); its target
 * says so (`wrapped: false`).
 */

import type { SlotRef } from '../token/slab.js';

const P_TASK = 0;
const P_SLAB = 1;
const P_INDEX = 2;
const P_GENERATION = 3;
const P_ROOT_SLAB = 4;
const P_ROOT_INDEX = 5;
const P_ROOT_GENERATION = 6;
/** The places of a root token's payload; a child's payload adds its root's three. */
const ROOT_PLACES = P_GENERATION + 1;
const CHILD_PLACES = P_ROOT_GENERATION + 1;

/** What rides along with a payload whose worker lacks some of its slabs: `[slabId, buffer]` each. */
export type SlabBuffers = [number, SharedArrayBuffer][];

/**
 * Main side: the payload of a task whose token has `slot`, and `root` when the token is a child
 * (`undefined` for a root token). One literal a shape, so V8 keeps both kinds packed.
 */
export function encodePayload(task: unknown, slot: SlotRef, root: SlotRef | undefined): unknown[] {
  if (root === undefined) return [task, slot.slab.id, slot.index, slot.generation];
  return [task, slot.slab.id, slot.index, slot.generation, root.slab.id, root.index, root.generation];
}

/** Main side: the slab of the payload's token. */
export function slabOf(payload: readonly unknown[]): number {
  return payload[P_SLAB] as number;
}

/** Main side: the slab of the payload's root token; `undefined` when its token is a root. */
export function rootSlabOf(payload: readonly unknown[]): number | undefined {
  return hasRootPlaces(payload) ? payload[P_ROOT_SLAB] as number : undefined;
}

/** Main side: send `buffers` with this payload, appended at its end, never past it ("never a hole" above). */
export function attachBuffers(payload: unknown[], buffers: SlabBuffers): void {
  payload[buffersAt(payload)] = buffers;
}

/**
 * Worker side: a payload's places as read by `decodePayload`. One is kept per worker and filled
 * anew for each task (it is read at once, before any user code): no object a task.
 */
export class DecodedPlaces {
  slab = 0;
  index = 0;
  generation = 0;
  /** False for a root token: the `root*` fields are then left from an earlier task, and not read. */
  hasRoot = false;
  rootSlab = 0;
  rootIndex = 0;
  rootGeneration = 0;
  /** `undefined` unless the payload carries buffers. */
  buffers: SlabBuffers | undefined = undefined;
}

/** Worker side: fill `places` from `payload` and return the user's task. */
export function decodePayload(payload: readonly unknown[], places: DecodedPlaces): unknown {
  const hasRoot = hasRootPlaces(payload);
  places.slab = payload[P_SLAB] as number;
  places.index = payload[P_INDEX] as number;
  places.generation = payload[P_GENERATION] as number;
  places.hasRoot = hasRoot;
  if (hasRoot) {
    places.rootSlab = payload[P_ROOT_SLAB] as number;
    places.rootIndex = payload[P_ROOT_INDEX] as number;
    places.rootGeneration = payload[P_ROOT_GENERATION] as number;
  }
  places.buffers = payload[buffersAt(payload)] as SlabBuffers | undefined;
  return payload[P_TASK];
}

/** True for a child token's payload: seven places (eight with buffers), against a root's four (five). */
export function hasRootPlaces(payload: readonly unknown[]): boolean {
  return payload.length >= CHILD_PLACES;
}

/** Where the buffers of a payload that carries them sit: right after its last place. */
export function buffersAt(payload: readonly unknown[]): number {
  return hasRootPlaces(payload) ? CHILD_PLACES : ROOT_PLACES;
}

/** Where the user's handler lives, packed into piscina's `name` (piscina sends `name` with every task anyway). */
export interface Target {
  filename: string;
  name: string;
  /** The payload is the `[task, slab, …]` array above; false: it is the task itself (no token). */
  wrapped: boolean;
}

const TARGET_PREFIX = 'fullstop:';

export function encodeTarget(target: Target): string {
  return TARGET_PREFIX + JSON.stringify([target.filename, target.name, target.wrapped ? 1 : 0]);
}

function isTarget(name: unknown): name is string {
  return typeof name === 'string' && name.startsWith(TARGET_PREFIX);
}

export function decodeTarget(encoded: string): Target | undefined {
  if (!isTarget(encoded)) return undefined;
  const [filename, name, wrapped] = JSON.parse(encoded.slice(TARGET_PREFIX.length)) as [string, string, number];
  return { filename, name, wrapped: wrapped === 1 };
}
