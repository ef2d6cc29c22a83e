// The plain worker of R1's floor and SQ1: one command a message, saying READY first. `wait` blocks on GO (R1); `loop` is SQ1's loop,
// polling a token (fullstop) or stopped by a `cancel` message, which arrives only once the loop has returned to the event loop (the status quo).
import { parentPort, workerData } from 'node:worker_threads';
import { tokenFromHandle } from '../../workers/runtime.js';
import { GO, now, POLL_EVERY, sayReady, step, type RawCommand, type RawReport } from '../handshake.js';

const [port, flags] = [parentPort!, workerData.flags as Int32Array];
let [loopEndedAt, sink] = [0n, 0];

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
      return { at: now(), ok: woke === 'ok', sink: 0 };
    }
    case 'loop': return loop(command);
    case 'cancel': return { at: now(), ok: true, sink, loopEndedAt };
  }
}
port.on('message', (command: RawCommand) => {
  if (command.kind !== 'cancel') sayReady(flags);
  const report = run(command);
  if (report !== undefined) port.postMessage(report);
});
