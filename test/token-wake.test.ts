/**
 * The cancel wake path's prepared work: what a cancel builds ahead of time (the default
 * `signal.reason` of a token watched from another thread, the error of a worker-side check) must
 * be indistinguishable from what it used to build on the spot, and never shared between two
 * throws or two tokens.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { isCancelledError, TurnRegistry, type CancelToken } from '../dist/src/index.js';
import { tokenFromHandle } from '../dist/workers/runtime.js';

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

afterEach(() => {
  for (const registry of registries.splice(0)) expect(registry.stats()).toMatchObject(ZERO);
});

describe('signal.reason of a watched token', () => {
  it('a cancel through the handle aborts with a CancelledError naming the turn, reason cancel.user', async () => {
    const turns = fresh();
    const token = turns.beginTurn('s-handle', 't-1');
    const reasonP = aborted(token);
    const handle = token.handle; // watched: its default reason is prepared now
    expect(tokenFromHandle(handle).cancel()).toBe(true);
    const reason = await reasonP as Error & { reason: unknown; sessionId: unknown; turnId: unknown };
    expect(isCancelledError(reason)).toBe(true);
    expect(reason).toMatchObject({ name: 'CancelledError', reason: 'cancel.user', sessionId: 's-handle', turnId: 't-1' });
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
