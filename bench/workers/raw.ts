/**
 * The raw floors' plain worker: one command a message, saying READY first. `wait` blocks on GO,
 * `poll` spins on it, `notify` stores + notifies it TRIP_AFTER_MS in (main waits with waitAsync);
 * `loop` is SQ1's loop, polling a token (fullstop) or stopped by a `cancel` message, which arrives
 * only once the loop has returned to the event loop (the status quo). `shape`: throw and catch a
 * pre-built Error after noticing, before the stamp.
 */

import { parentPort, workerData } from 'node:worker_threads';
import { tokenFromHandle } from '../../workers/runtime.js';
import { GO, LINGER_MS, now, POLL_EVERY, sayReady, SPARE, step, TRIP_AFTER_MS, type RawCommand, type RawReport } from '../handshake.js';

const port = parentPort!;
const flags = workerData.flags as Int32Array;
const PREBUILT = new Error('the turn is cancelled');
let loopEndedAt = 0n;
let sink = 0;

function noticed(shape: boolean | undefined): bigint {
  if (shape !== true) return now();
  try {
    throw PREBUILT;
  } catch (e) {
    if (e === PREBUILT) return now();
    throw e;
  }
}

function loop(command: Extract<RawCommand, { kind: 'loop' }>): RawReport | undefined {
  const token = command.handle === undefined ? undefined : tokenFromHandle(command.handle);
  const deadline = now() + BigInt(command.loopMs * 1e6);
  let x = command.id | 0;
  do {
    for (let i = 0; i < POLL_EVERY; i++) x = step(x);
    if (token?.isCancelled()) {
      const at = now();
      return { at, ok: true, sink: (sink ^= x), loopEndedAt: at };
    }
  } while (now() < deadline);
  loopEndedAt = now();
  sink ^= x;
  return token === undefined ? undefined : { at: 0n, ok: false, sink }; // a missed poll: void
}

function run(command: RawCommand): RawReport | undefined {
  switch (command.kind) {
    case 'wait': {
      const woke = Atomics.wait(flags, GO, 0, 60_000);
      return { at: noticed(command.shape), ok: woke === 'ok', sink: 0 };
    }
    case 'poll': {
      let x = 1;
      while (Atomics.load(flags, GO) === 0) x = step(x);
      return { at: noticed(command.shape), ok: true, sink: x };
    }
    case 'notify': {
      Atomics.wait(flags, SPARE, 0, TRIP_AFTER_MS);
      const at = now();
      Atomics.store(flags, GO, 1);
      Atomics.notify(flags, GO);
      Atomics.wait(flags, SPARE, 0, LINGER_MS);
      return { at, ok: true, sink: 0 };
    }
    case 'loop':
      return loop(command);
    case 'cancel':
      return { at: now(), ok: true, sink, loopEndedAt };
  }
}

port.on('message', (command: RawCommand) => {
  if (command.kind !== 'cancel') sayReady(flags);
  const report = run(command);
  if (report !== undefined) port.postMessage(report);
});
