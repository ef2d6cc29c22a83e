/**
 * Which store of a `ShardedLedger` holds a session: rendezvous (highest random weight) hashing of
 * the session id against each store's position in the list.
 *
 * Invariants:
 * 1. The route is a pure function of the session id and the number of stores: the same in every
 *    process, instance, runtime and release (the hash is written out here, over the id's UTF-16
 *    code units, so ids that are not well-formed route as exactly as any other).
 * 2. Appending a store to the list moves only the sessions that now route to it (about 1/(n+1) of
 *    them); removing or reordering stores moves more. Either way a moved session's earlier history
 *    stays in the store it was in (docs/postgres.md, "Past one database").
 */

/** FNV-1a's 32-bit offset basis and prime. */
const FNV_OFFSET = 0x811c9dc5;
const FNV_PRIME = 0x01000193;

/** The weight of `sessionId` at store `position`: FNV-1a over the code units, seeded by the position, then murmur3's finalizer. */
function weight(sessionId: string, position: number): number {
  let h = (FNV_OFFSET ^ Math.imul(position + 1, 0x9e3779b1)) >>> 0;
  for (let i = 0; i < sessionId.length; i++) {
    h ^= sessionId.charCodeAt(i);
    h = Math.imul(h, FNV_PRIME);
  }
  // FNV's low bits mix poorly into its high ones: the finalizer spreads every input bit.
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The position (0-based) of the store that holds `sessionId` among `count` stores (invariant 1). */
export function routeOf(sessionId: string, count: number): number {
  let best = 0;
  let bestWeight = -1;
  for (let position = 0; position < count; position++) {
    const w = weight(sessionId, position);
    if (w > bestWeight) [best, bestWeight] = [position, w]; // a tie keeps the lower position
  }
  return best;
}
