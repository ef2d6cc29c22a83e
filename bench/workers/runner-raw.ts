/**
 * The raw peer of the runner suite's pool task (bench/runner.bench.ts): a plain worker, no pool,
 * no library. It gets its cells once (workerData); on each message it says it is ready, blocks in
 * `Atomics.wait` on GO (what `sleep()` does underneath) until main's `Atomics.store` +
 * `Atomics.notify`, and posts one message back — the least a blocked task must do for main to
 * learn that it stopped.
 */

import { parentPort, workerData } from 'node:worker_threads';
import { GO, READY, type RawWake } from './runner-protocol.js';

const port = parentPort!;
const flags = workerData.flags as Int32Array;

port.on('message', () => {
  Atomics.store(flags, READY, 1);
  Atomics.notify(flags, READY);
  const woke = Atomics.wait(flags, GO, 0, 60_000);
  port.postMessage({ ok: woke === 'ok' } satisfies RawWake);
});
