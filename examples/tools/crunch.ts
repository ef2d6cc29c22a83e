/**
 * The demo's CPU-heavy tool, run in a TurnPool worker: phases of synchronous hashing with a
 * `checkpoint()` between chunks. When the stop lands it records the moment it noticed (so the
 * demo can print how long the worker took to see it) and rethrows.
 */
import { createHash } from 'node:crypto';
import { checkpoint, isCancelledError } from '../../workers/runtime.js';

export interface CrunchTask {
  phases: number;
  /** [0] = epoch ms (with µs) when the worker saw the stop; [1] = phases done. */
  notice: Float64Array;
  /** Set to 1 (and notified) once the task runs: the demo's "the worker is busy" handshake. */
  started?: Int32Array;
}

export default function crunch({ phases, notice, started }: CrunchTask): string {
  if (started !== undefined) {
    Atomics.store(started, 0, 1);
    Atomics.notify(started, 0);
  }
  let digest = 'seed';
  try {
    for (let phase = 0; phase < phases; phase++) {
      for (let chunk = 0; chunk < 200; chunk++) {
        checkpoint();
        for (let i = 0; i < 50; i++) digest = createHash('sha256').update(digest).digest('hex');
      }
      notice[1] = phase + 1;
    }
    return digest;
  } catch (error) {
    if (isCancelledError(error)) notice[0] = performance.timeOrigin + performance.now();
    throw error;
  }
}
