// Tasks of the pool and runner suites, for TurnPool and raw Piscina (which runs only `trivial` and `rawSleeper`). A task a cancel ends
// returns the moment it noticed, so its result is the stamp. The `raw*` tasks are P1–P3's floors: plain tasks on the same thread, using no fullstop API.
import { cancelTurn, checkCancelled, isCancelled, isCancelledError, sleep, sleepUnlessCancelled } from '../../workers/runtime.js';
import { GO, LINGER_MS, noticed, now, sayReady, SPARE, step, TRIP_AFTER_MS } from '../handshake.js';

type FlagsTask = { flags: Int32Array };
type FloorTask = FlagsTask & { shape: boolean };
export const trivial = (n: number): number => n; // P5, and P4's next task

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

/** P1-plain: blocked in `sleepUnlessCancelled()`, which returns false on cancel (nothing thrown); returns its stamp. */
export function sleepsUnlessCancelled({ flags }: FlagsTask): bigint {
  sayReady(flags);
  if (sleepUnlessCancelled(60_000)) throw new Error('sleepsUnlessCancelled: slept 60 s without a cancel');
  return now();
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
  const x = spinUntilCancelled(1);
  const at = now();
  return [at, x];
}

// The spin loops of P2-plain and of P2's floors, each in a function that returns when its loop ends.
// V8 compiles a sample's long loop on-stack (OSR) before the code after it has ever run; with the
// stamp after the loop in the same function, that code deoptimised at the loop's exit on every
// sample in some runs ("insufficient type feedback for call"; docs/benchmarks.md, "What each row does").
function spinUntilCancelled(x: number): number {
  while (!isCancelled()) x = step(x);
  return x;
}

function spinWhileGoIsZero(flags: Int32Array, x: number): number {
  while (Atomics.load(flags, GO) === 0) x = step(x);
  return x;
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

/** P1's floors: `Atomics.wait` on GO, then the stamp (`shape`: after throwing a pre-built Error); -1n if it woke from no block. */
export function rawWait({ flags, shape }: FloorTask): [bigint, number] {
  sayReady(flags);
  const woke = Atomics.wait(flags, GO, 0, 60_000);
  const at = noticed(shape);
  return [woke === 'ok' ? at : -1n, 0];
}

/** P2's floors: spin on GO with `Atomics.load`, then the stamp as `rawWait`'s. */
export function rawPoll({ flags, shape }: FloorTask): [bigint, number] {
  sayReady(flags);
  const x = spinWhileGoIsZero(flags, 1);
  const at = noticed(shape);
  return [at, x];
}

/** P3's floors: store and notify GO TRIP_AFTER_MS in (main waits with waitAsync), linger; returns when it stored. */
export function rawTrip({ flags }: FlagsTask): bigint {
  sayReady(flags);
  Atomics.wait(flags, SPARE, 0, TRIP_AFTER_MS);
  const at = now();
  Atomics.store(flags, GO, 1);
  Atomics.notify(flags, GO);
  Atomics.wait(flags, SPARE, 0, LINGER_MS);
  return at;
}

/** P4's floor on raw Piscina: a plain `Atomics.wait` until piscina terminates the worker. */
export function rawSleeper({ flags }: FlagsTask): never {
  sayReady(flags);
  Atomics.wait(flags, SPARE, 0, 60_000);
  throw new Error('rawSleeper: slept 60 s without being terminated');
}
