/**
 * The wire between `TurnPool` (main thread) and its worker entry (workers/pool-task.ts). Both
 * sides import these names, so the layout is stated once.
 *
 * Per task only numbers travel: `[task, slabId, index, generation]`, then the turn's root slot
 * `[..., rootSlabId, rootIndex, rootGeneration]` when the task's token is a child (so
 * `cancelTurn()` in the worker trips the whole turn, not just the task's child token). A worker
 * keeps every slab buffer it has been sent, by id. The pool remembers, per worker thread, which
 * slabs it has sent there; when the load balancer hands a task to a thread that has not seen one
 * of its slabs, the buffers ride along once at `P_BUFFERS` (the payload is cloned only when piscina
 * posts it, right after the balancer chose). So a buffer crosses to each worker once, the common
 * path carries no SharedArrayBuffer (cloning one into every payload costs throughput), and no
 * control signal ever travels in text that a task could also write (an error message).
 *
 * Never a hole: a payload always has the root's three places (`undefined` when the token is a
 * root), so adding `P_BUFFERS` appends to it. Writing index 7 of a four-element array would leave
 * holes, and V8 then makes every later array of the same literal holey too (its allocation site
 * learns the elements kind), and clones a holey array in its slow, sparse format: every payload
 * of the pool would pay for the few that carried buffers.
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
/** `[[slabId, buffer], ...]` for slabs the chosen worker has not been sent yet; absent on the common path. */
export const P_BUFFERS = 7;

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
