/**
 * The raw baselines of P1–P3 (bench/pool.bench.ts): a plain worker, no pool, no library. It gets
 * its cells once (workerData) and runs one command per message:
 *   wait   — P1: block in `Atomics.wait` on GO until main's `Atomics.notify`; report the wake.
 *   poll   — P2: spin on `Atomics.load(GO)` until main flips it; report when it saw the flip.
 *   notify — P3: sleep TRIP_AFTER_MS, then `Atomics.store` + `Atomics.notify` GO (main waits on it
 *            with `Atomics.waitAsync`), linger LINGER_MS; report when it stored.
 * Stamps are on the process-wide clock (pool-protocol.ts). With `withError` the worker builds a
 * plain Error after noticing and stamps after that (what throwing costs, without any library).
 */

import { parentPort, workerData } from 'node:worker_threads';
import { GO, LINGER_MS, READY, SPARE, TRIP_AFTER_MS, type RawCommand, type RawReport } from './pool-protocol.js';

const port = parentPort!;
const flags = workerData.flags as Int32Array;
const now = () => process.hrtime.bigint();

function ready(): void {
  Atomics.store(flags, READY, 1);
  Atomics.notify(flags, READY);
}

/** The stamp after noticing: at once, or after building an Error (`withError`). */
function noticed(withError: boolean | undefined): { at: bigint; sink: number } {
  if (withError !== true) return { at: now(), sink: 0 };
  const error = new Error('the turn is cancelled');
  return { at: now(), sink: error.message.length };
}

port.on('message', (command: RawCommand) => {
  switch (command.kind) {
    case 'wait': {
      ready();
      const woke = Atomics.wait(flags, GO, 0, 60_000);
      const { at, sink } = noticed(command.withError);
      port.postMessage({ at, ok: woke === 'ok', sink } satisfies RawReport);
      return;
    }
    case 'poll': {
      ready();
      let x = 1;
      while (Atomics.load(flags, GO) === 0) x = (Math.imul(x, 1103515245) + 12345) | 0;
      const { at, sink } = noticed(command.withError);
      port.postMessage({ at, ok: true, sink: x ^ sink } satisfies RawReport);
      return;
    }
    case 'notify': {
      ready();
      Atomics.wait(flags, SPARE, 0, TRIP_AFTER_MS);
      const at = now();
      Atomics.store(flags, GO, 1);
      Atomics.notify(flags, GO);
      Atomics.wait(flags, SPARE, 0, LINGER_MS);
      port.postMessage({ at, ok: true, sink: 0 } satisfies RawReport);
      return;
    }
  }
});
