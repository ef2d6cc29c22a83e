/**
 * A token's registry as the token sees it: every resource a token holds is counted there, for
 * `stats()` (state.ts, invariant 5).
 */

import type { SlabSet } from './slab.js';

/** Per-registry resource counts behind `stats()`. */
export interface Counters {
  tokens: number;
  bridges: number;
  owners: number;
}

/** What a registry lends its tokens: where slots come from and where they are counted. */
export interface TokenHost {
  readonly slabs: SlabSet;
  readonly counters: Counters;
}
