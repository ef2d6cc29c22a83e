// Tasks of the integrations suite, for TurnPool and plain Piscina alike. `crunch` is the tool's
// CPU-bound loop: it stops by its own check (`check`, TurnPool only) or by its thread being
// terminated (plain Piscina's abort). `flags[TID]` is the thread's kernel id, so main can tell
// when a terminated thread is really gone.
import { readlinkSync } from 'node:fs';
import { checkCancelled } from '../../workers/runtime.js';
import { sayReady, step } from '../handshake.js';

export type CrunchTask = { flags: Int32Array; check: boolean };
/** The flags cell that holds the task thread's kernel id (cells 0–2 are handshake.ts's). */
export const TID = 3;

export function crunch({ flags, check }: CrunchTask): number {
  Atomics.store(flags, TID, Number(readlinkSync('/proc/thread-self').split('/').at(-1)));
  sayReady(flags);
  let x = 1;
  for (let i = 0; ; i++) {
    x = step(x);
    if (check && (i & 1023) === 0) checkCancelled();
  }
}

/** The next call after a stop: a short task on whichever worker is there (a respawned one for Piscina). */
export const sum = (n: number): number => (n * (n + 1)) / 2;
