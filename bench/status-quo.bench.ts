/**
 * The status quo: how long a worker deep in a synchronous loop takes to notice a cancel.
 *
 * SQ1  Today: the main thread posts a cancel message on the worker's MessagePort. The worker is in
 *      a LOOP_MS synchronous loop, so the message is delivered only when the loop returns to the
 *      event loop. fullstop: the same loop polls `tokenFromHandle(handle).isCancelled()` every
 *      POLL_EVERY iterations and the main thread calls `token.cancel()`.
 *      Both cancel CANCEL_AT_MS into the loop; the figure is the time from post (or cancel) to the
 *      worker noticing, stamped on both threads with the one clock they share.
 *
 * Not tinybench: one sample is one real loop in a real worker, and what is measured spans two
 * threads. Pairs alternate which side goes first, in one worker; a void sample voids its pair.
 */

import { once } from 'node:events';
import { Worker } from 'node:worker_threads';
import { setTimeout as delay } from 'node:timers/promises';
import { TurnRegistry } from '../src/index.js';
import { assertNothingLive, compare, samplePairs, type BenchResult, type Suite, type SuiteContext } from './harness.js';
import { POLL_EVERY, type CancelMessage, type LoopReport as Report, type RunMessage } from './workers/protocol.js';

const LOOP_MS = 50;
const CANCEL_AT_MS = 10;
const SESSION = 'sq1';

export const suite: Suite = {
  name: 'status-quo',
  ids: ['SQ1'],
  async run(ctx) {
    if (ctx.wants?.('SQ1') === false) return [];
    return [await noticeLatency(ctx)];
  },
};

const now = () => performance.timeOrigin + performance.now();

async function noticeLatency(ctx: SuiteContext): Promise<BenchResult> {
  const pairs = ctx.quick ? 5 : 40;
  ctx.progress(`SQ1 ${pairs} pairs of a ${LOOP_MS} ms loop cancelled at ${CANCEL_AT_MS} ms`);
  const registry = new TurnRegistry();
  const loop = new Worker(new URL('./workers/sync-loop.js', import.meta.url));
  try {
    await once(loop, 'online');
    // One unrecorded pair: the worker's first loop also pays for loading and compiling its code.
    const { samples, voided } = await samplePairs('SQ1', { pairs, warmup: 1 }, {
      message: () => sampleMessage(loop),
      token: () => sampleToken(loop, registry),
    });
    assertNothingLive(registry, 'SQ1');
    return compare(
      { id: 'SQ1', metric: 'worker in a sync loop notices cancel', unit: 'µs', better: 'lower',
        extra: { loopMs: LOOP_MS, cancelAtMs: CANCEL_AT_MS, pollEvery: POLL_EVERY, voided } },
      samples.token!, 'MessagePort message', samples.message!, { paired: true },
    );
  } finally {
    await loop.terminate();
  }
}

/** One loop: `cancel` runs CANCEL_AT_MS after the loop started; µs from its stamp to the worker noticing, or undefined (void). */
async function sample(loop: Worker, message: RunMessage, cancel: () => void): Promise<number | undefined> {
  const started = once(loop, 'message');
  loop.postMessage(message);
  await started;
  const ended = once(loop, 'message') as Promise<[Report]>;
  await delay(CANCEL_AT_MS);
  const at = now();
  cancel();
  const [report] = await ended;
  // A status-quo cancel posted after the loop had ended measures nothing; so does a missed poll.
  return report.kind === 'noticed' && report.loopEndedAt >= at ? (report.at - at) * 1000 : undefined;
}

let ids = 0;

/** Status quo: post → delivered after the loop. */
function sampleMessage(loop: Worker): Promise<number | undefined> {
  const id = ++ids;
  return sample(loop, { kind: 'run', id, mode: 'message', loopMs: LOOP_MS }, () => loop.postMessage({ kind: 'cancel', id } satisfies CancelMessage));
}

/** fullstop: cancel → the loop's poll sees it. */
async function sampleToken(loop: Worker, registry: TurnRegistry): Promise<number | undefined> {
  const token = registry.beginTurn(SESSION);
  try {
    return await sample(loop, { kind: 'run', id: ++ids, mode: 'token', loopMs: LOOP_MS, handle: token.handle }, () => token.cancel());
  } finally {
    registry.endTurn(SESSION, token);
  }
}
