/**
 * The `crunch` tool's body, run in a `TurnPool` worker: a real CPU computation (a SHA-256 hash
 * chain), `phases` phases of about 100 ms each, with a `checkpoint()` every thousand hashes so a
 * stop is seen within a few milliseconds. Imports the worker runtime by relative path, as code
 * inside this repository must; a user's tool file imports `fullstop/worker`.
 */
import { createHash } from 'node:crypto';
import { checkpoint } from '../../workers/runtime.js';

/** What the main thread sends: how many phases to run. */
export interface CrunchTask {
  phases: number;
}

/** What the tool returns: the chain's last digest and how much work went into it. */
export interface CrunchResult {
  digest: string;
  phases: number;
  hashes: number;
}

/** Hashes between two checkpoints: a few milliseconds of work, so the stop is seen at once. */
const HASHES_PER_CHECK = 1000;
/** Checks per phase: about 100 ms of hashing on a laptop core. */
const CHECKS_PER_PHASE = 30;

/** Runs `phases` phases of hashing; throws `CancelledError` at the first checkpoint after a stop. */
export default function crunch({ phases }: CrunchTask): CrunchResult {
  let digest = 'fullstop';
  let hashes = 0;
  for (let phase = 0; phase < phases; phase++) {
    for (let check = 0; check < CHECKS_PER_PHASE; check++) {
      // Throws CancelledError once the turn is stopped; blocks while the registry is paused.
      checkpoint();
      for (let i = 0; i < HASHES_PER_CHECK; i++) digest = createHash('sha256').update(digest).digest('hex');
      hashes += HASHES_PER_CHECK;
    }
  }
  return { digest, phases, hashes };
}
