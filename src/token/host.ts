/**
 * What a registry lends its tokens: where their slots come from, and where the resources they
 * hold are counted (state.ts, invariant 5) for `stats()`.
 */

import type { SlabSet } from './slab.js';

/** Per-registry resource counts behind `stats()`. */
export interface Counters {
  tokens: number;
  bridges: number;
  owners: number;
}

export interface TokenHost {
  readonly slabs: SlabSet;
  readonly counters: Counters;
}
