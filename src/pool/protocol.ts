/**
 * The wire between `TurnPool` (main thread) and its worker entry (workers/pool-task.ts). Both
 * sides import these names, so the layout is stated once.
 *
 * Per task only numbers travel: `[task, slabId, index, generation]`, plus the turn's root slot
 * `[..., rootSlabId, rootIndex, rootGeneration]` when the task's token is a child (so
 * `cancelTurn()` in the worker trips the whole turn, not just the task's child token). A worker
 * keeps every slab buffer it has seen, by id. The first time a worker meets a slab id it does not
 * know, it refuses the task before running any user code (`NEED_SLAB` + the ids), and the pool
 * sends that task once more with `[[id, buffer], ...]` at `P_BUFFERS`. So a buffer crosses to each
 * worker about once, and the common path carries no SharedArrayBuffer (which costs ~8% of
 * throughput when cloned into every payload).
 *
 * A task run with no token at all travels as `[task]`.
 */

export const P_TASK = 0;
export const P_SLAB = 1;
export const P_INDEX = 2;
export const P_GENERATION = 3;
export const P_ROOT_SLAB = 4;
export const P_ROOT_INDEX = 5;
export const P_ROOT_GENERATION = 6;
/** `[[slabId, buffer], ...]` for slabs the worker said it lacks; absent on the common path. */
export const P_BUFFERS = 7;

/** Message prefix of the refusal a worker sends for an unknown slab (never reaches the caller). */
export const NEED_SLAB = 'fullstop:need-slab:';

/** Where the user's handler lives, packed into piscina's `name` (piscina sends `name` with every task anyway). */
export interface Target {
  filename: string;
  name: string;
  /** >1 binds the token with AsyncLocalStorage (tasks interleave in one worker), else a plain variable. */
  concurrent: boolean;
}

const TARGET_PREFIX = 'fullstop:';

export function encodeTarget(target: Target): string {
  return TARGET_PREFIX + JSON.stringify([target.filename, target.name, target.concurrent ? 1 : 0]);
}

export function decodeTarget(encoded: string): Target | undefined {
  if (!encoded.startsWith(TARGET_PREFIX)) return undefined;
  const [filename, name, concurrent] = JSON.parse(encoded.slice(TARGET_PREFIX.length)) as [string, string, number];
  return { filename, name, concurrent: concurrent === 1 };
}
