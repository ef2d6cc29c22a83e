/**
 * The cancel wake path's prepared work: what a cancel builds ahead of time (the default
 * `signal.reason` of a token watched from another thread, the error of a worker-side check) must
 * be indistinguishable from what it used to build on the spot, and never shared between two
 * throws or two tokens. And `WorkerToken.sleepUnlessCancelled`, the sleep that returns instead of
 * throwing. Synchronisation with a worker is by handshake only (a message, then a probe that the
 * worker really blocks on the slot, as in threads.test.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { isCancelledError, TurnRegistry, type CancelToken, type TokenHandle } from '../dist/src/index.js';
import { tokenFromHandle } from '../dist/workers/runtime.js';
import { eventually } from './support/leaks.js';

const ZERO = { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 };
const registries: TurnRegistry[] = [];

function fresh(): TurnRegistry {
  const registry = new TurnRegistry();
  registries.push(registry);
  return registry;
}

function aborted(token: CancelToken): Promise<unknown> {
  return new Promise((resolve) => token.signal.addEventListener('abort', () => resolve(token.signal.reason), { once: true }));
}

const workers: Worker[] = [];
const LIVENESS_MS = 2_000;

afterEach(async () => {
  for (const registry of registries.splice(0)) expect(registry.stats()).toMatchObject(ZERO);
  for (const worker of workers.splice(0)) {
    if (worker.threadId !== -1) await new Promise((resolve) => worker.once('exit', resolve));
  }
});

function start(handle: TokenHandle, ms: number): { woke: Promise<Record<string, unknown>>; sleeping: Promise<unknown> } {
  const worker = new Worker(new URL('./fixtures/token/sleep-unless-cancelled.mjs', import.meta.url), { workerData: { handle, ms } });
  workers.push(worker);
  const message = (type: string) => new Promise<Record<string, unknown>>((resolve, reject) => {
    const onMessage = (m: Record<string, unknown>) => { if (m.type === type) { worker.off('message', onMessage); resolve(m); } };
    worker.on('message', onMessage).once('error', reject);
  });
  return { sleeping: message('sleeping'), woke: message('woke') };
}

describe('signal.reason of a watched token', () => {
  it('a cancel through the handle aborts with a CancelledError (named AbortError, as signal reasons are) naming the turn, reason cancel.user', async () => {
    const turns = fresh();
    const token = turns.beginTurn('s-handle', 't-1');
    const reasonP = aborted(token);
    const handle = token.handle; // watched: its default reason is prepared now
    expect(tokenFromHandle(handle).cancel()).toBe(true);
    const reason = await reasonP as Error & { reason: unknown; sessionId: unknown; turnId: unknown };
    expect(isCancelledError(reason)).toBe(true);
    expect(reason).toMatchObject({ name: 'AbortError', reason: 'cancel.user', sessionId: 's-handle', turnId: 't-1' });
    expect(reason.message).toBe('turn t-1 of session s-handle was cancelled: cancel.user');
    expect(token.reason).toBe('cancel.user');
    turns.endTurn('s-handle', token);
  });

  it('a cancel with a reason of its own gets a reason built for it, not the prepared one', () => {
    const turns = fresh();
    const token = turns.beginTurn('s-own');
    void token.signal;
    void token.handle;
    const given = { why: 'user pressed stop' };
    token.cancel(given);
    const reason = token.signal.reason as { reason: unknown; message: string };
    expect(reason.reason).toBe(given);
    expect(reason.message).toContain('was cancelled:');
    expect(reason.message).not.toContain('cancel.user');
    turns.endTurn('s-own', token);
  });

  it('two watched tokens never share a reason object, whichever order signal and handle are read in', () => {
    const turns = fresh();
    const a = turns.beginTurn('s-a');
    const b = turns.beginTurn('s-b');
    void a.signal; void a.handle; // signal first
    void b.handle; void b.signal; // handle first
    a.cancel();
    b.cancel();
    const ra = a.signal.reason as { sessionId: unknown };
    const rb = b.signal.reason as { sessionId: unknown };
    expect(ra).not.toBe(rb);
    expect(ra.sessionId).toBe('s-a');
    expect(rb.sessionId).toBe('s-b');
    turns.endTurn('s-a', a);
    turns.endTurn('s-b', b);
  });

  it('a parent cancel gives a watched child the parent reason, and every slot reads cancelled in the first listener', () => {
    const turns = fresh();
    const root = turns.beginTurn('s-tree');
    const child = root.child();
    const grandchild = child.child();
    const handles = [root.handle, child.handle, grandchild.handle];
    const seen: boolean[][] = [];
    root.signal.addEventListener('abort', () => seen.push(handles.map((h) => tokenFromHandle(h).isCancelled())));
    void child.signal;
    root.cancel();
    expect(seen).toEqual([[true, true, true]]);
    expect((child.signal.reason as { reason: unknown }).reason).toBe('cancel.parent');
    expect(grandchild.reason).toBe('cancel.parent');
    turns.endTurn('s-tree', root);
  });
});

describe('WorkerToken.checkCancelled', () => {
  it('throws a fresh CancelledError on every check once cancelled, and a retired one after retire', () => {
    const turns = fresh();
    const token = turns.beginTurn('s-check');
    const worker = tokenFromHandle(token.handle);
    worker.checkCancelled(); // running: nothing thrown (and the error of a later cancel is prepared)
    token.cancel();
    const thrown: unknown[] = [];
    for (let i = 0; i < 3; i++) {
      try {
        worker.checkCancelled();
      } catch (e) {
        thrown.push(e);
      }
    }
    expect(thrown).toHaveLength(3);
    expect(new Set(thrown).size).toBe(3);
    for (const e of thrown) expect(e).toMatchObject({ name: 'CancelledError', reason: 'cancel.user', message: 'the turn is cancelled' });
    turns.endTurn('s-check', token);
    expect(() => worker.checkCancelled()).toThrow(expect.objectContaining({ reason: 'retired' }));
  });

  it('a token retired without a cancel throws the retired error, even after a check prepared the cancelled one', () => {
    const turns = fresh();
    const token = turns.beginTurn('s-retire');
    const worker = tokenFromHandle(token.handle);
    worker.checkCancelled();
    turns.endTurn('s-retire', token);
    expect(() => worker.checkCancelled()).toThrow(expect.objectContaining({ name: 'CancelledError', reason: 'retired' }));
  });
});

describe('WorkerToken.sleepUnlessCancelled', () => {
  it('in a worker: wakes at once on cancel and returns false, throwing nothing', async () => {
    const turns = fresh();
    const token = turns.beginTurn('s-sleep');
    const handle = token.handle;
    const { sleeping, woke } = start(handle, 60_000);
    await sleeping;
    const cells = new Int32Array(handle.buffer);
    // A notify that finds a waiter returns 1: the worker really is blocked on the slot (the wake is spurious, it sleeps on).
    await eventually(() => Atomics.notify(cells, handle.index, 1) === 1, 10_000, 'the worker to block on the slot');
    await eventually(() => Atomics.notify(cells, handle.index, 1) === 1, 10_000, 'the worker to sleep on after a spurious wake');
    const t0 = performance.now();
    token.cancel();
    const reply = await woke;
    expect(performance.now() - t0).toBeLessThan(LIVENESS_MS);
    expect(reply).toMatchObject({ threw: false, slept: false });
    turns.endTurn('s-sleep', token);
  });

  it('in a worker: wakes at once when the token retires and returns false', async () => {
    const turns = fresh();
    const token = turns.beginTurn('s-retire-sleep');
    const handle = token.handle;
    const { sleeping, woke } = start(handle, 60_000);
    await sleeping;
    const cells = new Int32Array(handle.buffer);
    await eventually(() => Atomics.notify(cells, handle.index, 1) === 1, 10_000, 'the worker to block on the slot');
    turns.endTurn('s-retire-sleep', token);
    expect(await woke).toMatchObject({ threw: false, slept: false });
  });

  it('returns true when the time runs out with the token running, false at once when already cancelled', () => {
    const turns = fresh();
    const token = turns.beginTurn('s-time');
    const worker = tokenFromHandle(token.handle);
    const t0 = performance.now();
    expect(worker.sleepUnlessCancelled(5)).toBe(true);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(4);
    token.cancel();
    const t1 = performance.now();
    expect(worker.sleepUnlessCancelled(60_000)).toBe(false);
    expect(performance.now() - t1).toBeLessThan(LIVENESS_MS);
    turns.endTurn('s-time', token);
  });

  it('refuses a missing, non-number or out-of-range ms like sleep does', () => {
    const turns = fresh();
    const token = turns.beginTurn('s-args');
    const worker = tokenFromHandle(token.handle);
    expect(() => worker.sleepUnlessCancelled(undefined as never)).toThrow(TypeError);
    expect(() => worker.sleepUnlessCancelled('5' as never)).toThrow(TypeError);
    expect(() => worker.sleepUnlessCancelled(-1)).toThrow(RangeError);
    expect(() => worker.sleepUnlessCancelled(2 ** 31)).toThrow(RangeError);
    expect(token.isCancelled()).toBe(false);
    turns.endTurn('s-args', token);
  });
});
