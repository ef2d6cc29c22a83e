// Tasks of the pool and runner suites, for TurnPool and raw Piscina (which runs only `trivial` and
// `rawSleeper`). A task a cancel ends returns the moment it noticed, so its result is the stamp.

import { cancelTurn, checkCancelled, isCancelled, isCancelledError, sleep } from '../../workers/runtime.js';
import { LINGER_MS, now, sayReady, SPARE, step, TRIP_AFTER_MS } from '../handshake.js';

type FlagsTask = { flags: Int32Array };
/** P5, and P4's next task. */
export const trivial = (n: number): number => n;

/** P1: blocked in `sleep()`; returns when the `CancelledError` was caught in the task. */
export function sleeper({ flags }: FlagsTask): bigint {
  sayReady(flags);
  try {
    sleep(60_000);
  } catch (e) {
    const at = now();
    if (isCancelledError(e)) return at;
    throw e;
  }
  throw new Error('sleeper: slept 60 s without a cancel');
}

/** P4 and R*: the usual cooperative task — `sleep()` throws on cancel and the error propagates. */
export function sleepsUntilStopped({ flags }: FlagsTask): never {
  sayReady(flags);
  sleep(60_000);
  throw new Error('sleepsUntilStopped: slept 60 s without a cancel');
}

/** P2: a busy loop calling `checkCancelled()` every iteration; returns [noticed at, sink]. */
export function pollsEveryIteration({ flags }: FlagsTask): [bigint, number] {
  sayReady(flags);
  let x = 1;
  try {
    for (;;) {
      checkCancelled();
      x = step(x);
    }
  } catch (e) {
    const at = now();
    if (isCancelledError(e)) return [at, x];
    throw e;
  }
}

/** P2-plain: the same loop on `isCancelled()`, which throws nothing. */
export function pollsIsCancelled({ flags }: FlagsTask): [bigint, number] {
  sayReady(flags);
  let x = 1;
  while (!isCancelled()) x = step(x);
  return [now(), x];
}

/** P3: wait TRIP_AFTER_MS, trip the turn, linger; returns when it tripped. */
export function trips({ flags }: FlagsTask): bigint {
  sayReady(flags);
  Atomics.wait(flags, SPARE, 0, TRIP_AFTER_MS);
  const at = now();
  if (!cancelTurn('bench')) throw new Error('trips: cancelTurn() returned false');
  Atomics.wait(flags, SPARE, 0, LINGER_MS);
  return at;
}

/** P4's floor on raw Piscina: a plain `Atomics.wait` until piscina terminates the worker. */
export function rawSleeper({ flags }: FlagsTask): never {
  sayReady(flags);
  Atomics.wait(flags, SPARE, 0, 60_000);
  throw new Error('rawSleeper: slept 60 s without being terminated');
}
