/**
 * Worker of the status-quo suite (SQ1): a synchronous CPU loop of a fixed length that learns of a
 * cancel either from a MessagePort message (the status quo: a message can only be delivered once
 * the loop has returned to the event loop) or by polling its turn's token every POLL_EVERY
 * iterations (fullstop).
 *
 * Times are `performance.timeOrigin + performance.now()`: Node gives a worker the same time origin
 * as its parent, so stamps taken on the two threads are on one clock.
 */

import { parentPort } from 'node:worker_threads';
import { tokenFromHandle } from '../../workers/runtime.js';
import { POLL_EVERY, type CancelMessage, type LoopReport as Report, type RunMessage } from './protocol.js';

const port = parentPort!;
const now = () => performance.timeOrigin + performance.now();
let loopEndedAt = 0;
let sink = 0;

port.on('message', (message: RunMessage | CancelMessage) => {
  if (message.kind === 'cancel') {
    port.postMessage({ kind: 'noticed', id: message.id, at: now(), loopEndedAt, sink } satisfies Report);
    return;
  }
  const token = message.handle === undefined ? undefined : tokenFromHandle(message.handle);
  port.postMessage({ kind: 'started', id: message.id } satisfies Report);
  const deadline = now() + message.loopMs;
  let x = message.id | 0;
  for (;;) {
    for (let i = 0; i < POLL_EVERY; i++) x = (Math.imul(x, 1103515245) + 12345) | 0;
    if (token?.isCancelled()) {
      const at = now();
      sink ^= x;
      port.postMessage({ kind: 'noticed', id: message.id, at, loopEndedAt: at, sink } satisfies Report);
      return;
    }
    if (now() >= deadline) break;
  }
  loopEndedAt = now();
  sink ^= x;
  if (token !== undefined) port.postMessage({ kind: 'missed', id: message.id } satisfies Report);
});
