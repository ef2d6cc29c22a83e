/**
 * The pool task of the runner suite (bench/runner.bench.ts): the cooperative tool of the turn
 * being stopped. It says it is ready, then blocks in `sleep()` from `fullstop/worker`; the stop's
 * token trip wakes it and `sleep()` throws, which ends the task with a `CancelledError`.
 */

import { sleep } from '../../workers/runtime.js';
import { READY, type FlagsTask } from './runner-protocol.js';

export function sleepsUntilStopped({ flags }: FlagsTask): never {
  Atomics.store(flags, READY, 1);
  Atomics.notify(flags, READY);
  sleep(60_000);
  throw new Error('sleepsUntilStopped: slept 60 s without a stop');
}
