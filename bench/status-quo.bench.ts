// SQ1: a worker in a LOOP_MS synchronous loop cancelled CANCEL_AT_MS in, by a MessagePort message
// (the status quo) vs `token.cancel()`. One sample is one real loop in the raw worker.

import { setTimeout as delay } from 'node:timers/promises';
import { TurnRegistry } from '../src/index.js';
import { now, POLL_EVERY, RawWorker, usSince, type RawCommand } from './handshake.js';
import { assertNothingLive, compare, samplePairs, withTurn, type Suite } from './harness.js';

const LOOP_MS = 50;
const CANCEL_AT_MS = 10;
let ids = 0;

/** One loop: `cancel` runs CANCEL_AT_MS after the loop started; µs from its stamp to the worker noticing, or undefined (void). */
async function sample(raw: RawWorker, command: RawCommand, cancel: () => void): Promise<number | undefined> {
  const { report, acted: t0 } = await raw.sample(command, async () => {
    await delay(CANCEL_AT_MS);
    const t0 = now();
    cancel();
    return t0;
  });
  // A status-quo cancel posted after the loop had ended measures nothing; so does a missed poll.
  return report.ok && report.loopEndedAt! >= t0 ? usSince(t0, report.at) : undefined;
}

export const suite: Suite = {
  ids: ['SQ1'],
  async run(ctx) {
    const pairs = ctx.quick ? 4 : 40;
    const registry = new TurnRegistry();
    const raw = new RawWorker();
    try {
      await raw.online;
      // One unrecorded pair: the worker's first loop also pays for loading and compiling its code.
      const { samples, voided } = await samplePairs('SQ1', { pairs, warmup: 1 }, {
        message: () => {
          const id = ++ids;
          return sample(raw, { kind: 'loop', id, loopMs: LOOP_MS }, () => raw.worker.postMessage({ kind: 'cancel', id } satisfies RawCommand));
        },
        token: () => withTurn(registry, 'sq1', (token) => sample(raw, { kind: 'loop', id: ++ids, loopMs: LOOP_MS, handle: token.handle }, () => token.cancel())),
      }, ctx);
      assertNothingLive(registry, 'SQ1');
      return [compare({ id: 'SQ1', metric: 'worker in a sync loop notices cancel', unit: 'µs', extra: { loopMs: LOOP_MS, cancelAtMs: CANCEL_AT_MS, pollEvery: POLL_EVERY, voided } },
        samples.token, ['MessagePort message', samples.message])];
    } finally {
      await raw.close();
    }
  },
};
