/**
 * The wire between `TurnPool` (main thread) and its worker entry (workers/pool-task.ts). Both
 * sides import these names, so the layout is stated once.
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
 * that is an allocation a task on each side (docs/benchmarks.md, "Where P5's time goes", has what
 * was measured of each layout). The length says root or child (`hasRootPlaces`). The buffers are
 * an append, at the payload's length: writing past the end would leave holes, and V8 then makes
 * every later array of the same literal holey too (its allocation site learns the elements kind)
 * and clones a holey array in its slow, sparse format, so every payload of the pool would pay for
 * the few that carried buffers.
 *
 * A task run with no token at all travels as the task itself, exactly as piscina sends it (a custom
 * task queue sees the caller's task, `move()` and transfer lists are piscina's own); its target
 * says so (`wrapped: false`).
 */

export const P_TASK = 0;
export const P_SLAB = 1;
export const P_INDEX = 2;
export const P_GENERATION = 3;
export const P_ROOT_SLAB = 4;
export const P_ROOT_INDEX = 5;
export const P_ROOT_GENERATION = 6;
/** The places of a root token's payload; a child's payload adds its root's three. */
const ROOT_PLACES = P_GENERATION + 1;
const CHILD_PLACES = P_ROOT_GENERATION + 1;

/** True for a child token's payload: seven places (eight with buffers), against a root's four (five). */
export function hasRootPlaces(payload: readonly unknown[]): boolean {
  return payload.length >= CHILD_PLACES;
}

/** Where the `[[slabId, buffer], ...]` of a payload that carries buffers sit: right after its last place. */
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
