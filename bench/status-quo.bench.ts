// SQ1: a worker in a LOOP_MS synchronous loop cancelled CANCEL_AT_MS in, by a MessagePort message
// (the status quo) vs `token.cancel()`. One sample is one real loop in the raw worker.
import { setTimeout as delay } from 'node:timers/promises';
import { TurnRegistry } from '../src/index.js';
import type { TokenHandle } from '../workers/runtime.js';
import { now, POLL_EVERY, RawWorker, usSince, type RawCommand } from './handshake.js';
import { assertNothingLive, compare, samplePairs, suiteOf, withTurn } from './harness.js';

const [LOOP_MS, CANCEL_AT_MS] = [50, 10];
let ids = 0;

/** One loop (polling `handle`'s token, if any): `cancel` runs CANCEL_AT_MS in; µs from its stamp to the worker noticing, or undefined (void). */
async function sample(raw: RawWorker, handle: TokenHandle | undefined, cancel: (id: number) => void): Promise<number | undefined> {
  const id = ++ids;
  const { report, acted: t0 } = await raw.sample({ kind: 'loop', id, loopMs: LOOP_MS, handle }, async () => {
    await delay(CANCEL_AT_MS);
    const t0 = now();
    cancel(id);
    return t0;
  });
  // A status-quo cancel posted after the loop had ended measures nothing; so does a missed poll.
  return report.ok && report.loopEndedAt! >= t0 ? usSince(t0, report.at) : undefined;
}

export const suite = suiteOf({
  async SQ1(ctx) {
    const [registry, raw] = [new TurnRegistry(), new RawWorker()];
    try {
      await raw.online;
      // One unrecorded pair: the worker's first loop also pays for loading and compiling its code.
      const { samples: s, voided } = await samplePairs('SQ1', { pairs: ctx.quick ? 4 : 40, warmup: 1 }, {
        message: () => sample(raw, undefined, (id) => raw.worker.postMessage({ kind: 'cancel', id } satisfies RawCommand)),
        token: () => withTurn(registry, 'sq1', (token) => sample(raw, token.handle, () => token.cancel())),
      }, ctx);
      assertNothingLive(registry, 'SQ1');
      const extra = { loopMs: LOOP_MS, cancelAtMs: CANCEL_AT_MS, pollEvery: POLL_EVERY, voided };
      return compare({ id: 'SQ1', metric: 'worker in a sync loop notices cancel', unit: 'µs', extra }, s.token, ['MessagePort message', s.message]);
    } finally {
      await raw.close();
    }
  },
});
