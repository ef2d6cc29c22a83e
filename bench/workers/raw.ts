/**
 * The raw floors of P1–P3 and R*: a plain worker, no pool, no library. It gets its cells once
 * (workerData) and runs one command a message:
 *   wait   — block in `Atomics.wait` on GO until main's notify; report the wake.
 *   poll   — spin on `Atomics.load(GO)` until main flips it; report when it saw the flip.
 *   sleep  — P1's decomposition: `tokenFromHandle(handle).sleep()`, the library's wake path on a
 *            turn's root slot with no pool; report when the CancelledError was caught.
 *   slot   — P1's decomposition: a plain `Atomics.wait` on the turn's slot (`running` is its
 *            running word), so main's `token.cancel()` is timed without the library's worker side.
 *   notify — sleep TRIP_AFTER_MS, `Atomics.store` + `notify` GO (main waits with
 *            `Atomics.waitAsync`), linger LINGER_MS; report when it stored.
 * With `shape`, a pre-built Error is thrown and caught after noticing, before the stamp.
 */

import { parentPort, workerData } from 'node:worker_threads';
import { tokenFromHandle } from '../../workers/runtime.js';
import { GO, LINGER_MS, READY, SPARE, TRIP_AFTER_MS, type RawCommand, type RawReport } from './protocol.js';

const port = parentPort!;
const flags = workerData.flags as Int32Array;
const now = () => process.hrtime.bigint();
const PREBUILT = new Error('the turn is cancelled');

function ready(): void {
  Atomics.store(flags, READY, 1);
  Atomics.notify(flags, READY);
}

function noticed(shape: boolean | undefined): bigint {
  if (shape !== true) return now();
  try {
    throw PREBUILT;
  } catch (e) {
    if (e === PREBUILT) return now();
    throw e;
  }
}

port.on('message', (command: RawCommand) => {
  ready();
  let report: RawReport;
  if (command.kind === 'wait') {
    const woke = Atomics.wait(flags, GO, 0, 60_000);
    report = { at: noticed(command.shape), ok: woke === 'ok', sink: 0 };
  } else if (command.kind === 'slot') {
    const woke = Atomics.wait(new Int32Array(command.handle!.buffer), command.handle!.index, command.running!, 60_000);
    report = { at: now(), ok: woke === 'ok', sink: 0 };
  } else if (command.kind === 'sleep') {
    const token = tokenFromHandle(command.handle!);
    report = { at: 0n, ok: false, sink: 0 };
    try {
      token.sleep(60_000);
    } catch (e) {
      report = { at: now(), ok: (e as Error).name === 'CancelledError', sink: 0 };
    }
  } else if (command.kind === 'poll') {
    let x = 1;
    while (Atomics.load(flags, GO) === 0) x = (Math.imul(x, 1103515245) + 12345) | 0;
    report = { at: noticed(command.shape), ok: true, sink: x };
  } else {
    Atomics.wait(flags, SPARE, 0, TRIP_AFTER_MS);
    const at = now();
    Atomics.store(flags, GO, 1);
    Atomics.notify(flags, GO);
    Atomics.wait(flags, SPARE, 0, LINGER_MS);
    report = { at, ok: true, sink: 0 };
  }
  port.postMessage(report);
});
