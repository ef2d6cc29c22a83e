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
  const loop = new LoopWorker();
  try {
    await loop.online;
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

/** Status quo: post → delivered after the loop. µs, or undefined if the loop ended first. */
async function sampleMessage(loop: LoopWorker): Promise<number | undefined> {
  const id = loop.nextId();
  const { started, ended } = loop.run({ kind: 'run', id, mode: 'message', loopMs: LOOP_MS });
  await started;
  await delay(CANCEL_AT_MS);
  const postedAt = now();
  loop.post({ kind: 'cancel', id });
  const report = await ended;
  if (report.kind !== 'noticed' || report.loopEndedAt < postedAt) return undefined;
  return (report.at - postedAt) * 1000;
}

/** fullstop: cancel → the loop's poll sees it. µs, or undefined if the loop ended first. */
async function sampleToken(loop: LoopWorker, registry: TurnRegistry): Promise<number | undefined> {
  const token = registry.beginTurn(SESSION);
  try {
    const id = loop.nextId();
    const { started, ended } = loop.run({ kind: 'run', id, mode: 'token', loopMs: LOOP_MS, handle: token.handle });
    await started;
    await delay(CANCEL_AT_MS);
    const cancelledAt = now();
    token.cancel();
    const report = await ended;
    return report.kind === 'noticed' ? (report.at - cancelledAt) * 1000 : undefined;
  } finally {
    registry.endTurn(SESSION, token);
  }
}

/** The worker and its replies, routed by loop id. A worker error rejects whatever is pending. */
class LoopWorker {
  readonly #worker = new Worker(new URL('./workers/sync-loop.js', import.meta.url));
  readonly #pending = new Map<string, { resolve(r: Report): void; reject(e: unknown): void }>();
  #id = 0;
  readonly online: Promise<void>;

  constructor() {
    this.online = new Promise((resolve, reject) => {
      this.#worker.once('online', () => resolve());
      this.#worker.once('error', reject);
    });
    this.#worker.on('message', (report: Report) => {
      const key = `${report.kind === 'started' ? 'started' : 'ended'}:${report.id}`;
      this.#pending.get(key)?.resolve(report);
      this.#pending.delete(key);
    });
    const fail = (error: unknown) => {
      for (const waiter of this.#pending.values()) waiter.reject(error);
      this.#pending.clear();
    };
    this.#worker.on('error', fail);
    this.#worker.on('exit', (code) => fail(new Error(`SQ1: the loop worker exited (code ${code})`)));
  }

  nextId(): number {
    return ++this.#id;
  }

  run(message: RunMessage): { started: Promise<Report>; ended: Promise<Report> } {
    const started = this.#expect(`started:${message.id}`);
    const ended = this.#expect(`ended:${message.id}`);
    this.#worker.postMessage(message);
    return { started, ended };
  }

  post(message: CancelMessage): void {
    this.#worker.postMessage(message);
  }

  async terminate(): Promise<void> {
    this.#worker.removeAllListeners('exit');
    await this.#worker.terminate();
  }

  #expect(key: string): Promise<Report> {
    return new Promise((resolve, reject) => this.#pending.set(key, { resolve, reject }));
  }
}
