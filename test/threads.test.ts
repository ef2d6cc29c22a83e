/**
 * Tokens across real worker threads: sleep() wakes on cancel and on retire, a worker-side cancel
 * aborts the main signal exactly once (the bridge), checkpoint() honours pause, and many turns
 * leave no bridge, slot or thread behind (docs/design.md §1, §4).
 *
 * Synchronisation is by handshake only. A worker says "about to block" by message; the test then
 * confirms the worker really is blocked in `Atomics.wait` by probing the cell with
 * `Atomics.notify(cells, index, 1)`, which returns 1 only when a waiter was there. The probe's
 * wake is spurious (the word did not change), and the code under test must go back to sleep —
 * so every probe also checks that a notify without a change wakes nobody for good.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { TurnPool, TurnRegistry, type CancelToken, type TokenHandle } from '../dist/src/index.js';
import { tokenFromHandle } from '../dist/workers/runtime.js';
import { addOwner } from '../dist/src/token/owners.js';
import { eventually, threadCount } from './support/leaks.js';

const ZERO = { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 };
const LIVENESS_MS = 2_000;
const registries: TurnRegistry[] = [];
const workers: Worker[] = [];

function fresh(): TurnRegistry {
  const registry = new TurnRegistry();
  registries.push(registry);
  return registry;
}

function start(fixture: string, workerData?: unknown): Worker {
  const worker = new Worker(new URL(`./fixtures/token/${fixture}`, import.meta.url), { workerData });
  workers.push(worker);
  return worker;
}

interface Message { type: string; [key: string]: unknown }

/** The next message of `type` from `worker`; rejects if the worker fails or exits first. */
function next(worker: Worker, type: string): Promise<Message> {
  return new Promise((resolve, reject) => {
    const onMessage = (m: Message) => { if (m.type === type) { cleanup(); resolve(m); } };
    const onError = (e: Error) => { cleanup(); reject(e); };
    const onExit = (code: number) => { cleanup(); reject(new Error(`worker exited (${code}) before '${type}'`)); };
    const cleanup = () => {
      worker.off('message', onMessage); worker.off('error', onError); worker.off('exit', onExit);
    };
    worker.on('message', onMessage).on('error', onError).on('exit', onExit);
  });
}

function exited(worker: Worker): Promise<void> {
  return worker.threadId === -1 ? Promise.resolve() : new Promise((resolve) => worker.once('exit', () => resolve()));
}

/** Resolves once some thread is blocked in `Atomics.wait` on `cells[index]` (see the file comment). */
function blockedOn(buffer: SharedArrayBuffer, index: number, what: string): Promise<void> {
  const cells = new Int32Array(buffer);
  return eventually(() => Atomics.notify(cells, index, 1) === 1, 10_000, what);
}

let baselineThreads: number;

beforeAll(async () => {
  // Start and end one worker first, so lazily started process threads (libuv's pool, used while
  // a worker loads its modules) are already counted in the baseline.
  const warm = start('cancel-on-request.mjs');
  await next(warm, 'ready');
  warm.postMessage({ type: 'exit' });
  await exited(warm);
  baselineThreads = threadCount();
});

afterEach(async () => {
  for (const registry of registries.splice(0)) expect(registry.stats()).toEqual(ZERO);
  for (const worker of workers.splice(0)) expect(worker.threadId, 'a worker outlived its test').toBe(-1);
});

afterAll(async () => {
  await eventually(() => threadCount() === baselineThreads, 5_000, 'threads back to the baseline');
});

describe('sleep() in a worker', () => {
  async function sleeper(registry: TurnRegistry) {
    const token = registry.beginTurn('s');
    const handle = token.handle;
    const worker = start('sleep-until-woken.mjs', { handle, ms: 60_000 });
    let woke = false;
    const wokeMessage = next(worker, 'woke').finally(() => { woke = true; });
    await next(worker, 'sleeping');
    await blockedOn(handle.buffer, handle.index, 'the worker to block in sleep(60 s)');
    await blockedOn(handle.buffer, handle.index, 'the worker to go back to sleep after a spurious wake');
    expect(woke).toBe(false);
    return { token, worker, wokeMessage };
  }

  it('wakes at once when the token is cancelled, and throws CancelledError', async () => {
    const registry = fresh();
    const { worker, wokeMessage } = await sleeper(registry);
    const t0 = performance.now();
    expect(registry.markCancelled('s')).toBe(true);
    const reply = await wokeMessage;
    expect(performance.now() - t0).toBeLessThan(LIVENESS_MS);
    expect(reply).toMatchObject({ threw: true, cancelled: true });
    expect(reply.ms as number).toBeLessThan(LIVENESS_MS);
    await exited(worker);
    registry.endTurn('s');
  });

  it('wakes at once when the token retires without a cancel, and throws CancelledError', async () => {
    const registry = fresh();
    const { token, worker, wokeMessage } = await sleeper(registry);
    const t0 = performance.now();
    registry.endTurn('s');
    const reply = await wokeMessage;
    expect(performance.now() - t0).toBeLessThan(LIVENESS_MS);
    expect(reply).toMatchObject({ threw: true, cancelled: true });
    expect(reply.ms as number).toBeLessThan(LIVENESS_MS);
    expect(token.isCancelled()).toBe(false);
    await exited(worker);
  });

  it('returns normally when its time runs out and nobody cancels', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = start('sleep-until-woken.mjs', { handle: token.handle, ms: 30 });
    const reply = await next(worker, 'woke');
    expect(reply.threw).toBe(false);
    expect(reply.ms as number).toBeGreaterThanOrEqual(29);
    await exited(worker);
    registry.endTurn('s');
  });
});

describe('sleep() without a time', () => {
  it('is a TypeError naming ms in a worker, never a sleep forever', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = start('sleep-until-woken.mjs', { handle: token.handle, ms: undefined });
    const reply = await next(worker, 'woke');
    expect(reply).toMatchObject({ threw: true, cancelled: false, name: 'TypeError' });
    expect(reply.message).toMatch(/^ms: expected a number of milliseconds, got undefined/);
    await exited(worker);
    expect(token.isCancelled()).toBe(false);
    registry.endTurn('s');
  });

  it('is a TypeError inside a pool task, with a token and without one', async () => {
    const registry = fresh();
    const pool = new TurnPool({ filename: new URL('./fixtures/pool/tasks.mjs', import.meta.url).href, maxThreads: 1, minThreads: 1 });
    try {
      const token = registry.beginTurn('s');
      await expect(pool.run({}, { name: 'sleeper', token })).rejects.toThrow(/ms: expected a number of milliseconds, got undefined/);
      await expect(pool.run({}, { name: 'sleeper' })).rejects.toThrow(/ms: expected a number of milliseconds, got undefined/);
      expect(token.isCancelled()).toBe(false);
      registry.endTurn('s', token);
    } finally {
      await pool.destroy();
    }
  });

  it('is refused on the main thread too, with the values a timer cannot take', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = tokenFromHandle(token.handle);
    expect(() => worker.sleep(undefined as never)).toThrow(TypeError);
    expect(() => worker.sleep('10' as never)).toThrow(TypeError);
    for (const ms of [-1, NaN, Infinity, 2 ** 31]) expect(() => worker.sleep(ms), `ms ${ms}`).toThrow(RangeError);
    expect(token.isCancelled()).toBe(false);
    registry.endTurn('s');
  });
});

describe('a cancel from a worker', () => {
  it('aborts the main-thread signal exactly once; a second cancel changes nothing; a retired handle refuses', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s', 'turn-1');
    let aborts = 0;
    const aborted = new Promise<void>((resolve) => token.signal.addEventListener('abort', () => { aborts++; resolve(); }));
    // The signal aborts once by AbortSignal's own rule; what a repeated cancel could repeat is the
    // token's telling its owners (a stop's hard-stop and cleanup hang on it).
    let told = 0;
    const disposeOwner = addOwner(token, { kind: 'task', settled: Promise.resolve(), hardStop() {}, onCancel() { told++; } });
    const worker = start('cancel-on-request.mjs', { handle: token.handle });
    await next(worker, 'ready');
    expect(registry.stats().liveBridges).toBe(1);

    worker.postMessage({ type: 'cancel' });
    expect((await next(worker, 'cancelled')).result).toBe(true);
    // Nothing on the main thread reads the token: only the bridge can deliver this abort.
    await aborted;
    expect(aborts).toBe(1);
    expect(told).toBe(1);
    // The bridge keeps watching the cancelled token until the turn ends.
    expect(registry.stats().liveBridges).toBe(1);
    expect(token.isCancelled()).toBe(true);
    // The reason cannot cross an Int32; the main thread records the default.
    expect(token.reason).toBe('cancel.user');
    expect(registry.isCancelled('s')).toBe(true);

    worker.postMessage({ type: 'cancel' });
    expect((await next(worker, 'cancelled')).result).toBe(true);
    // A barrier instead of a few turns of the event loop: a second token of the same slab,
    // cancelled by the worker *after* that second cancel, aborts through the same bridge cell, so
    // once its signal has aborted the bridge has handled every wake the second cancel caused.
    const barrier = registry.beginTurn('barrier', 'turn-b');
    expect(barrier.handle.buffer).toBe(token.handle.buffer); // the same slab, so the same bridge
    const barrierAborted = new Promise<void>((resolve) => barrier.signal.addEventListener('abort', () => resolve()));
    worker.postMessage({ type: 'handle', handle: barrier.handle });
    worker.postMessage({ type: 'cancel' });
    expect((await next(worker, 'cancelled')).result).toBe(true);
    await barrierAborted;
    // The second cancel of the first token changed nothing of it.
    expect(aborts).toBe(1);
    expect(told).toBe(1);
    expect(token.reason).toBe('cancel.user');
    expect(token.isCancelled()).toBe(true);
    expect(registry.isCancelled('s')).toBe(true);
    registry.endTurn('barrier');

    disposeOwner();
    registry.endTurn('s');
    expect(registry.stats().liveBridges).toBe(0);
    worker.postMessage({ type: 'cancel' });
    expect((await next(worker, 'cancelled')).result).toBe(false);
    expect(aborts).toBe(1);
    worker.postMessage({ type: 'exit' });
    await exited(worker);
  });

  it('of a child token aborts only that child, not the turn', async () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    const aborted = new Promise<void>((resolve) => child.signal.addEventListener('abort', () => resolve()));
    const worker = start('cancel-on-request.mjs', { handle: child.handle });
    await next(worker, 'ready');
    worker.postMessage({ type: 'cancel' });
    await next(worker, 'cancelled');
    await aborted;
    expect(child.isCancelled()).toBe(true);
    expect(root.isCancelled()).toBe(false);
    expect(root.signal.aborted).toBe(false);
    worker.postMessage({ type: 'exit' });
    await exited(worker);
    registry.endTurn('s');
  });

  it('racing the turn end aborts the signal once if it landed first and never if it came too late', async () => {
    const registry = fresh();
    const worker = start('serve-turns.mjs');
    let landed = 0;
    for (let turn = 0; turn < 100; turn++) {
      const token = registry.beginTurn('s');
      let aborts = 0;
      token.signal.addEventListener('abort', () => aborts++);
      const done = next(worker, 'done');
      worker.postMessage({ type: 'turn', turn, action: 'cancel', handle: token.handle });
      // Vary where the turn end falls relative to the worker's cancel.
      if (turn % 3 === 1) await new Promise((resolve) => setImmediate(resolve));
      if (turn % 3 === 2) await done;
      registry.endTurn('s');
      const { result } = await done;
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
      // A cancel that landed before retire is folded in by the retire (or the bridge) exactly once.
      expect(aborts).toBe(result ? 1 : 0);
      expect(token.isCancelled()).toBe(result);
      if (result) landed++;
      expect(registry.stats()).toEqual(ZERO);
    }
    expect(landed).toBeGreaterThan(0);
    expect(landed).toBeLessThan(100);
    worker.postMessage({ type: 'exit' });
    await exited(worker);
  });
  it('races main\'s cancel against a worker\'s on one slot: one flip wins, the signal aborts once, a sleeper always wakes', async () => {
    // Main's cancel flips and wakes a leaf's slot itself, before the state is touched
    // (CancelToken.cancel); a worker's flip wakes it from its side. Whichever thread flips first, the
    // other's flip fails, and the slot's sleeper must still be woken exactly by the winner.
    const registry = fresh();
    const go = new Int32Array(new SharedArrayBuffer(4));
    const canceller = start('cancel-on-go.mjs', { go: go.buffer });
    const sleeper = start('sleep-on-each.mjs');
    await Promise.all([next(canceller, 'ready'), next(sleeper, 'ready')]);
    const won = { main: 0, worker: 0 };
    for (let round = 0; round < 400 && (won.main < 5 || won.worker < 5); round++) {
      const token = registry.beginTurn('s');
      let aborts = 0;
      token.signal.addEventListener('abort', () => aborts++);
      const handle = token.handle;
      Atomics.store(go, 0, 0);
      const armed = next(canceller, 'armed');
      canceller.postMessage({ type: 'handle', handle });
      await armed;
      await blockedOn(go.buffer, 0, 'the canceller to wait for go');
      const sleeping = next(sleeper, 'sleeping');
      const woke = next(sleeper, 'woke');
      sleeper.postMessage({ type: 'handle', handle });
      await sleeping;
      await blockedOn(handle.buffer, handle.index, 'the sleeper to block in sleep(60 s)');
      const cancelled = next(canceller, 'cancelled');
      Atomics.store(go, 0, 1);
      Atomics.notify(go, 0);
      // Every other round main waits up to 2 ms before its cancel, so the worker's flip usually
      // comes first there, and main's in the others.
      for (const until = performance.now() + (round % 2) * Math.random() * 2; performance.now() < until;);
      expect(token.cancel('from-main')).toBe(true);
      const { flipped } = await cancelled;
      if (flipped) won.worker++;
      else won.main++;
      expect(await Promise.race([woke, new Promise((r) => setTimeout(() => r('still asleep'), LIVENESS_MS))])).toEqual({ type: 'woke', cancelled: true });
      for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
      expect(aborts).toBe(1);
      expect(token.isCancelled()).toBe(true);
      registry.endTurn('s');
    }
    expect(won.main).toBeGreaterThanOrEqual(5);
    expect(won.worker).toBeGreaterThanOrEqual(5);
    canceller.postMessage({ type: 'exit' });
    sleeper.postMessage({ type: 'exit' });
    await Promise.all([exited(canceller), exited(sleeper)]);
  });
});

describe('checkpoint() in a worker', () => {
  async function checkpointer(token: CancelToken) {
    const worker = start('checkpoint-on-request.mjs', { handle: token.handle });
    await next(worker, 'ready');
    return worker;
  }

  it('passes straight through while the registry is not paused', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = await checkpointer(token);
    worker.postMessage({ type: 'checkpoint' });
    expect((await Promise.race([next(worker, 'passed'), next(worker, 'threw')])).type).toBe('passed');
    worker.postMessage({ type: 'exit' });
    await exited(worker);
    registry.endTurn('s');
  });

  it('blocks while the registry is paused and resume() releases it', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = await checkpointer(token);
    registry.pause();
    const outcome = await blockedCheckpointPending(worker, token);
    let settled = false;
    void outcome.result.then(() => { settled = true; });
    // Blocked, and still blocked after the probe's spurious wake.
    await blockedOn(token.handle.buffer, 0, 'the worker to stay blocked in checkpoint()');
    expect(settled).toBe(false);
    registry.resume();
    expect(await outcome.result).toMatchObject({ type: 'passed' });
    expect(token.isCancelled()).toBe(false);
    worker.postMessage({ type: 'exit' });
    await exited(worker);
    registry.endTurn('s');
  });

  it('a cancel wakes a paused checkpoint, which throws, while the registry stays paused', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = await checkpointer(token);
    registry.pause();
    const outcome = await blockedCheckpointPending(worker, token);
    registry.markCancelled('s');
    expect(await outcome.result).toMatchObject({ type: 'threw', cancelled: true });
    expect(registry.paused).toBe(true);
    registry.resume();
    worker.postMessage({ type: 'exit' });
    await exited(worker);
    registry.endTurn('s');
  });

  it('a retire wakes a paused checkpoint, which throws', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = await checkpointer(token);
    registry.pause();
    const outcome = await blockedCheckpointPending(worker, token);
    registry.endTurn('s');
    expect(await outcome.result).toMatchObject({ type: 'threw', cancelled: true });
    expect(registry.paused).toBe(true);
    registry.resume();
    worker.postMessage({ type: 'exit' });
    await exited(worker);
  });

  it("stopping one paused turn does not resume another turn's checkpoint", async () => {
    const registry = fresh();
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    const workerA = await checkpointer(a);
    const workerB = await checkpointer(b);
    registry.pause();
    const outcomeA = await blockedCheckpointPending(workerA, a);
    const outcomeB = await blockedCheckpointPending(workerB, b);
    let bSettled = false;
    void outcomeB.result.then(() => { bSettled = true; });
    registry.markCancelled('a');
    expect(await outcomeA.result).toMatchObject({ type: 'threw', cancelled: true });
    // The cancel woke every waiter of the slab; b must have gone back to waiting, still blocked.
    await eventually(() => Atomics.notify(new Int32Array(b.handle.buffer), 0, 1) === 1, 10_000, 'b blocked again');
    expect(bSettled).toBe(false);
    registry.resume();
    expect(await outcomeB.result).toMatchObject({ type: 'passed' });
    for (const worker of [workerA, workerB]) worker.postMessage({ type: 'exit' });
    await Promise.all([exited(workerA), exited(workerB)]);
    registry.endTurn('a');
    registry.endTurn('b');
  });

  /** Like `blockedCheckpoint`, but hands back the still-pending outcome once the worker is blocked. */
  async function blockedCheckpointPending(worker: Worker, token: CancelToken) {
    const result = Promise.race([next(worker, 'passed'), next(worker, 'threw')]);
    worker.postMessage({ type: 'checkpoint' });
    await next(worker, 'entering');
    await blockedOn(token.handle.buffer, 0, 'the worker to block in checkpoint()');
    return { result };
  }
});

describe('many turns', () => {
  it('200 turns, each handing its handle to a worker, leave no bridge, slot or thread behind', async () => {
    const registry = fresh();
    const lanes = 4;
    const pool = Array.from({ length: lanes }, () => start('serve-turns.mjs'));
    const outcomes: Record<string, number> = {};
    const count = (what: string) => { outcomes[what] = (outcomes[what] ?? 0) + 1; };
    let peakBridges = 0;
    await Promise.all(pool.map(async (worker, lane) => {
      const session = `lane-${lane}`;
      for (let i = 0; i < 200 / lanes; i++) {
        const turn = lane * 1000 + i;
        const token = registry.beginTurn(session, `turn-${turn}`);
        const aborted = new Promise<void>((resolve) => token.signal.addEventListener('abort', () => resolve()));
        const done = next(worker, 'done');
        const how = i % 3;
        if (how === 0) {
          // The worker cancels; the bridge brings it to the main thread.
          worker.postMessage({ type: 'turn', turn, action: 'cancel', handle: token.handle });
          expect((await done).result).toBe(true);
          await aborted;
          count('worker-cancel');
        } else {
          const sleeping = next(worker, 'sleeping');
          worker.postMessage({ type: 'turn', turn, action: 'sleep', handle: token.handle });
          await sleeping;
          peakBridges = Math.max(peakBridges, registry.stats().liveBridges);
          if (how === 1) registry.markCancelled(session);
          else registry.endTurn(session);
          expect((await done).result).toBe('woke');
          count(how === 1 ? 'main-cancel' : 'retire');
        }
        registry.endTurn(session);
        expect(registry.currentToken(session)).toBeUndefined();
      }
    }));
    expect(outcomes['worker-cancel']! + outcomes['main-cancel']! + outcomes['retire']!).toBe(200);
    expect(peakBridges).toBeGreaterThan(0);
    expect(peakBridges).toBeLessThanOrEqual(lanes);
    expect(registry.stats()).toEqual(ZERO);
    // No thread per turn: only the lanes' workers are extra, and they go when they exit.
    expect(threadCount()).toBeLessThanOrEqual(baselineThreads + lanes * 2);
    for (const worker of pool) worker.postMessage({ type: 'exit' });
    await Promise.all(pool.map(exited));
    await eventually(() => threadCount() === baselineThreads, 5_000, 'threads back to the baseline');
  });
});

describe('tokenFromHandle', () => {
  it('rejects something that is not a TokenHandle', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const { buffer, index, generation } = token.handle;
    expect(() => tokenFromHandle(null as never)).toThrow(TypeError);
    expect(() => tokenFromHandle({ buffer: new ArrayBuffer(8), index, generation } as never)).toThrow(TypeError);
    expect(() => tokenFromHandle({ buffer, index: 0, generation })).toThrow(RangeError);
    expect(() => tokenFromHandle({ buffer, index: buffer.byteLength / 4, generation })).toThrow(RangeError);
    expect(() => tokenFromHandle({ buffer, index: 1.5, generation })).toThrow(RangeError);
    expect(() => tokenFromHandle({ buffer, index, generation: -1 })).toThrow(RangeError);
    expect(() => tokenFromHandle({ buffer, index, generation: 2 ** 30 })).toThrow(RangeError);
    expect(() => tokenFromHandle(token.handle).sleep(-1)).toThrow(RangeError);
    expect(token.isCancelled()).toBe(false);
    registry.endTurn('s');
  });

  it('sleepUnlessCancelled() of a WorkerToken returns true when the time ran out, false at once once cancelled or retired', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const worker = tokenFromHandle(token.handle);
    expect(worker.sleepUnlessCancelled(1)).toBe(true);
    expect(() => worker.sleepUnlessCancelled(-1)).toThrow(RangeError);
    token.cancel();
    // A 60 s wait that returns: the slot no longer reads running, so it does not wait at all.
    expect(worker.sleepUnlessCancelled(60_000)).toBe(false);
    registry.endTurn('s');
    const retired = registry.beginTurn('s');
    const late = tokenFromHandle(retired.handle);
    registry.endTurn('s');
    expect(late.sleepUnlessCancelled(60_000)).toBe(false);
  });
});
