/**
 * CancelToken and the token tree: cancel, reason, signal, throwIfCancelled, child(), retire,
 * owners, and the errors a token throws (also once they have crossed a thread).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import {
  CancelledError, CancelToken, FatalToolError, isCancelledError, ToolError, TurnRegistry,
} from '../dist/src/index.js';
import { tokenFromHandle } from '../dist/workers/runtime.js';
import { addOwner, addOwnerOf, ownersOf, removeOwnerOf, type LinkedOwner, type Owner } from '../dist/src/token/owners.js';
import { renderReason } from '../dist/src/errors.js';
import { notifiesDuring } from './support/notify-spy.js';
import { inspect } from 'node:util';

const registries: TurnRegistry[] = [];
const workers: Worker[] = [];

function fresh(options?: { slots?: number }): TurnRegistry {
  const registry = new TurnRegistry(options);
  registries.push(registry);
  return registry;
}

afterEach(async () => {
  // Every test leaves its registries empty and no worker running (docs/design.md §1, invariant 5).
  for (const registry of registries.splice(0)) {
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  }
  for (const worker of workers.splice(0)) {
    expect(worker.threadId, 'a worker is still running after the test').toBe(-1);
  }
});

function owner(kind = 'task'): Owner & { retiredCalls: number } {
  const o = { kind, settled: Promise.resolve(), hardStop() {}, retiredCalls: 0, onRetire() { o.retiredCalls++; } };
  return o;
}

describe('cancel()', () => {
  it('returns true on the first call and on every repeat while the token is running or cancelled', () => {
    const registry = fresh();
    const token = registry.beginTurn('s', 't1');
    expect(token.isCancelled()).toBe(false);
    expect(token.cancel()).toBe(true);
    expect(token.cancel()).toBe(true);
    expect(token.cancel('again')).toBe(true);
    expect(token.isCancelled()).toBe(true);
    registry.endTurn('s', token);
  });

  it('returns false once the token is retired and changes nothing', () => {
    const registry = fresh();
    const running = registry.beginTurn('s');
    running.retire();
    expect(running.retired).toBe(true);
    expect(running.cancel('late')).toBe(false);
    expect(running.isCancelled()).toBe(false);
    expect(running.reason).toBeUndefined();

    const cancelled = registry.beginTurn('s');
    cancelled.cancel('first');
    cancelled.retire();
    expect(cancelled.cancel('late')).toBe(false);
    // Retiring never un-cancels, and a late cancel never changes the recorded reason.
    expect(cancelled.isCancelled()).toBe(true);
    expect(cancelled.reason).toBe('first');
  });

  it('keeps the first reason; later reasons are ignored', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    expect(token.reason).toBeUndefined();
    token.cancel('timeout');
    token.cancel('cancel.user');
    expect(token.reason).toBe('timeout');
    registry.endTurn('s');
  });

  it("uses 'cancel.user' when no reason is given", () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    token.cancel();
    expect(token.reason).toBe('cancel.user');
    registry.endTurn('s');
  });

  it('retire() is idempotent', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    token.retire();
    token.retire();
    registry.endTurn('s', token);
    expect(token.retired).toBe(true);
    expect(registry.stats().liveTokens).toBe(0);
  });
});

describe('signal', () => {
  it('aborts exactly once, with a CancelledError reason carrying the session, turn and reason', () => {
    const registry = fresh();
    const token = registry.beginTurn('s1', 'turn-7');
    let aborts = 0;
    token.signal.addEventListener('abort', () => aborts++);
    expect(token.signal.aborted).toBe(false);
    token.cancel('timeout');
    token.cancel('again');
    registry.markCancelled('s1');
    registry.endTurn('s1', token);
    expect(aborts).toBe(1);
    expect(token.signal.aborted).toBe(true);
    const reason = token.signal.reason as CancelledError;
    expect(isCancelledError(reason)).toBe(true);
    expect(reason).toBeInstanceOf(CancelledError);
    expect(reason.reason).toBe('timeout');
    expect(reason.sessionId).toBe('s1');
    expect(reason.turnId).toBe('turn-7');
    expect(reason.hard).toBe(false);
  });

  it('is already aborted when first read after the cancel', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    token.cancel('x');
    expect(token.signal.aborted).toBe(true);
    expect(isCancelledError(token.signal.reason)).toBe(true);
    expect(token.signal).toBe(token.signal);
    registry.endTurn('s');
  });

  it('never aborts when the token retires without a cancel', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const signal = token.signal;
    let aborts = 0;
    signal.addEventListener('abort', () => aborts++);
    registry.endTurn('s');
    token.cancel();
    expect(signal.aborted).toBe(false);
    expect(token.signal.aborted).toBe(false);
    expect(aborts).toBe(0);
  });
});

describe('throwIfCancelled()', () => {
  it('does nothing while the token runs and throws a CancelledError with the reason once cancelled', () => {
    const registry = fresh();
    const token = registry.beginTurn('s', 'turn-1');
    expect(() => token.throwIfCancelled()).not.toThrow();
    token.cancel('timeout');
    let thrown: unknown;
    try { token.throwIfCancelled(); } catch (e) { thrown = e; }
    expect(thrown).toBeInstanceOf(CancelledError);
    expect(thrown).toMatchObject({ name: 'CancelledError', reason: 'timeout', sessionId: 's', turnId: 'turn-1' });
    registry.endTurn('s');
    // Still throws after the turn: a cancelled token stays cancelled.
    expect(() => token.throwIfCancelled()).toThrow(CancelledError);
  });

  it('does not throw for a token that retired without a cancel', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    registry.endTurn('s');
    expect(() => token.throwIfCancelled()).not.toThrow();
  });
});

describe('child()', () => {
  it('is cancelled with its parent, down the whole tree, with reason cancel.parent', () => {
    const registry = fresh();
    const root = registry.beginTurn('s', 't');
    const child = root.child();
    const grandchild = child.child();
    let childAborts = 0;
    child.signal.addEventListener('abort', () => childAborts++);
    expect(child.sessionId).toBe('s');
    expect(child.turnId).toBe('t');
    root.cancel('cancel.user');
    expect(child.isCancelled()).toBe(true);
    expect(grandchild.isCancelled()).toBe(true);
    expect(root.reason).toBe('cancel.user');
    expect(child.reason).toBe('cancel.parent');
    expect(grandchild.reason).toBe('cancel.parent');
    expect(childAborts).toBe(1);
    expect((child.signal.reason as CancelledError).reason).toBe('cancel.parent');
    registry.endTurn('s');
  });

  it('never passes its own cancel up to the parent or across to a sibling', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const a = root.child();
    const b = root.child();
    const a1 = a.child();
    a.cancel('timeout');
    expect(a.isCancelled()).toBe(true);
    expect(a1.isCancelled()).toBe(true);
    expect(root.isCancelled()).toBe(false);
    expect(b.isCancelled()).toBe(false);
    expect(root.signal.aborted).toBe(false);
    expect(registry.isCancelled('s')).toBe(false);
    registry.endTurn('s');
  });

  it('made of a cancelled token starts cancelled, with reason cancel.parent and an aborted signal', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    root.cancel('x');
    const child = root.child();
    expect(child.isCancelled()).toBe(true);
    expect(child.reason).toBe('cancel.parent');
    expect(child.signal.aborted).toBe(true);
    expect(() => child.throwIfCancelled()).toThrow(CancelledError);
    registry.endTurn('s');
  });

  it('retires with its parent, children first, and refuses a cancel afterwards', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    const grandchild = child.child();
    expect(registry.stats().liveTokens).toBe(3);
    expect(registry.stats().liveSlots).toBe(3);
    registry.endTurn('s');
    expect(child.retired).toBe(true);
    expect(grandchild.retired).toBe(true);
    expect(child.cancel()).toBe(false);
    expect(grandchild.cancel()).toBe(false);
    expect(child.signal.aborted).toBe(false);
  });

  it('retired alone leaves the parent running and cancellable', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    const sibling = root.child();
    child.retire();
    expect(child.retired).toBe(true);
    expect(root.retired).toBe(false);
    expect(root.isCancelled()).toBe(false);
    expect(registry.currentToken('s')).toBe(root);
    expect(registry.stats().liveTokens).toBe(2);
    // The retired child is no longer part of the tree: the parent's cancel skips it.
    expect(root.cancel()).toBe(true);
    expect(child.isCancelled()).toBe(false);
    expect(sibling.isCancelled()).toBe(true);
    registry.endTurn('s');
  });

  it('of a retired token throws a CancelledError and allocates nothing', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    registry.endTurn('s');
    expect(() => root.child()).toThrow(CancelledError);
    expect(registry.stats().liveTokens).toBe(0);
  });

  it('lets a parent abort listener see the whole subtree already cancelled', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    const grandchild = child.child();
    const seen: boolean[] = [];
    root.signal.addEventListener('abort', () => seen.push(child.isCancelled(), grandchild.isCancelled()));
    root.cancel();
    expect(seen).toEqual([true, true]);
    registry.endTurn('s');
  });

  it.each(['after', 'before'])('flips every slot of the subtree before its first notify, then wakes descendants before the token (handles taken %s the children are made)', (when) => {
    // A worker polling a descendant's slot sees the cancel after a few compare-exchanges, not
    // after a notify per ancestor; a worker asleep on a descendant is woken first. A root whose
    // handle left before it had children must not wake itself with its flip (its leaf fast path).
    const registry = fresh();
    const root = registry.beginTurn('s');
    const early = when === 'before' ? root.handle : undefined;
    const child = root.child();
    const grandchild = child.child();
    const sibling = root.child();
    const tokens = { root, child, grandchild, sibling };
    const handles = Object.fromEntries(Object.entries(tokens).map(([name, t]) => [name, name === 'root' ? early ?? t.handle : t.handle]));
    const cancelledAt = (name: string) => {
      const { buffer, index } = handles[name]!;
      return (Atomics.load(new Int32Array(buffer), index) & 0b11) === 2;
    };
    const nameOf = (cells: Int32Array, index: number) =>
      Object.keys(handles).find((n) => handles[n]!.buffer === cells.buffer && handles[n]!.index === index);
    let notified: { seen: { name: string | undefined; allFlipped: boolean } | undefined }[];
    try {
      notified = notifiesDuring(() => root.cancel(), (cells, index) => ({ name: nameOf(cells, index), allFlipped: Object.keys(handles).every(cancelledAt) }));
    } finally {
      registry.endTurn('s');
    }
    expect(notified.length).toBeGreaterThan(0);
    expect(notified.every((n) => n.seen!.allFlipped)).toBe(true);
    const slotOrder = notified.map((n) => n.seen!.name).filter((n) => n !== undefined);
    expect(new Set(slotOrder)).toEqual(new Set(Object.keys(handles)));
    expect(slotOrder.at(-1)).toBe('root');
    expect(slotOrder.indexOf('grandchild')).toBeLessThan(slotOrder.indexOf('child'));
  });

  it('prints as its session, turn, state and reason, and printing folds in no cancel from another thread', () => {
    const registry = fresh();
    const token = registry.beginTurn('s', 'turn-1');
    let aborts = 0;
    token.signal.addEventListener('abort', () => aborts++);
    expect(inspect(token)).toBe("CancelToken { sessionId: 's', turnId: 'turn-1', state: 'running' }");
    // A cancel through the handle, as a worker's: the slot says so, the main thread has not looked yet.
    tokenFromHandle(token.handle).cancel();
    expect(inspect(token)).toBe("CancelToken { sessionId: 's', turnId: 'turn-1', state: 'cancelled' }");
    expect(aborts).toBe(0);
    expect(token.isCancelled()).toBe(true);
    expect(aborts).toBe(1);
    expect(inspect(token)).toBe("CancelToken { sessionId: 's', turnId: 'turn-1', state: 'cancelled', reason: 'cancel.user' }");
    registry.endTurn('s');
    expect(inspect(token)).toBe("CancelToken { sessionId: 's', turnId: 'turn-1', state: 'retired', reason: 'cancel.user' }");
    expect(inspect({ token }, { depth: 0 })).toBe('{ token: [CancelToken] }');
  });

  it('works through a Proxy of the token, as a reactive store wraps the objects it holds', () => {
    // A store that wraps what it holds (Vue's reactive(), MobX) calls methods with `this` = the
    // proxy; a private field read there would throw. The proxy is not a CancelToken for the
    // library's own checks (isCancelToken), but its methods must still act on the token.
    const registry = fresh();
    const token = registry.beginTurn('s');
    const wrapped = new Proxy(token, {});
    const { buffer, index } = wrapped.handle;
    expect(wrapped.cancel('from-a-store')).toBe(true);
    expect([token.isCancelled(), wrapped.isCancelled(), token.reason]).toEqual([true, true, 'from-a-store']);
    expect(Atomics.load(new Int32Array(buffer), index) & 0b11).toBe(2);
    registry.endTurn('s');
    expect(wrapped.cancel()).toBe(false);
  });

  it.each(['token.cancel()', 'registry.markCancelled()'])('wakes a leaf\'s slot once, already flipped, and bumps its control cell (%s)', (how) => {
    // The flip and the wake are a leaf cancel's first step (CancelToken.cancel inlines flipSlot);
    // the state's share of the cancel must not wake the slot a second time.
    const registry = fresh();
    const token = registry.beginTurn('s');
    const { buffer, index } = token.handle;
    const cells = new Int32Array(buffer);
    const control = Atomics.load(cells, 0);
    let notified: { index: number; seen: boolean | undefined }[];
    try {
      notified = notifiesDuring(() => (how === 'token.cancel()' ? token.cancel() : registry.markCancelled('s')),
        (c, i) => c.buffer === buffer && (Atomics.load(c, i) & 0b11) === 2);
      expect(token.isCancelled()).toBe(true);
      expect(Atomics.load(cells, 0)).not.toBe(control);
    } finally {
      registry.endTurn('s');
    }
    expect(notified.filter((n) => n.index === index)).toEqual([{ index, buffer, seen: true }]);
  });

  it('wakes nobody for a token whose handle never left the thread, and wakes the slot once it has', () => {
    // No other thread can sleep on a slot it has no handle for, so that notify would be wasted
    // on the stop's path; once the handle is out, the notify is what wakes a sleeping worker.
    const registry = fresh();
    const hidden = registry.beginTurn('hidden');
    const hiddenChild = hidden.child();
    const shown = registry.beginTurn('shown');
    const shownIndex = shown.handle.index;
    try {
      expect(notifiesDuring(() => hidden.cancel())).toEqual([]);
      expect([hidden.isCancelled(), hiddenChild.isCancelled()]).toEqual([true, true]);
      expect(notifiesDuring(() => shown.cancel()).map((n) => n.index)).toContain(shownIndex);
    } finally {
      registry.endTurn('hidden');
      registry.endTurn('shown');
    }
  });

  it('reads cancelled on the main thread as soon as an ancestor slot is cancelled from another thread', () => {
    // tokenFromHandle works on any thread; here it writes the cancel into the root's slot exactly
    // as a worker would, before the bridge had any chance to run.
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    const grandchild = child.child();
    expect(tokenFromHandle(root.handle).cancel()).toBe(true);
    // Read the deepest token first: it must not depend on someone reading the root before it.
    expect(grandchild.isCancelled()).toBe(true);
    expect(child.isCancelled()).toBe(true);
    expect(root.isCancelled()).toBe(true);
    expect(root.reason).toBe('cancel.user');
    expect(grandchild.reason).toBe('cancel.parent');
    expect(() => grandchild.throwIfCancelled()).toThrow(CancelledError);
    registry.endTurn('s');
  });
});

describe('retire() with listeners that re-enter', () => {
  it('a child retired alone, whose fold-in of a cross-thread cancel ends the turn from a listener, is released once', () => {
    const registry = fresh({ slots: 2 });
    const root = registry.beginTurn('s');
    const child = root.child();
    root.signal.addEventListener('abort', () => registry.endTurn('s'));
    // A worker cancels the root; the child's retire folds it in and the listener ends the turn,
    // which retires the child from inside the child's own retire().
    tokenFromHandle(root.handle).cancel();
    child.retire();
    expect(root.retired).toBe(true);
    expect(child.retired).toBe(true);
    expect(child.reason).toBe('cancel.parent');
    expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
    // The freed cells went back once each: two new tokens get two distinct slots.
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    expect(a.handle.index === b.handle.index && a.handle.buffer === b.handle.buffer).toBe(false);
    b.cancel();
    expect(a.isCancelled()).toBe(false);
    registry.endTurn('a');
    registry.endTurn('b');
  });
});

describe('retire() racing a cancel from another thread', () => {
  it('a cancel that arrives while the token is retiring is either seen by the token or refused, never lost', () => {
    // A child's owner is told of the retire from inside the parent's retire(), after the parent
    // last looked at its slot and before it releases it: a cancel written there stands for one
    // from a worker that lands in that window.
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    const fromWorker = tokenFromHandle(root.handle);
    let accepted: boolean | undefined;
    let aborts = 0;
    root.signal.addEventListener('abort', () => aborts++);
    const dispose = addOwner(child, {
      kind: 'probe', settled: Promise.resolve(), hardStop() {},
      onRetire: () => { accepted = fromWorker.cancel(); dispose(); },
    });
    registry.endTurn('s');
    expect(accepted).toBeDefined();
    // If the cancel was accepted it happened before the retire, and the token must show it.
    expect(root.isCancelled()).toBe(accepted);
    expect(aborts).toBe(accepted ? 1 : 0);
    expect(fromWorker.cancel()).toBe(false);
  });
});

describe('owners', () => {
  it('are counted in liveOwners until disposed, and the disposer is idempotent', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const a = owner();
    const b = owner('process');
    const disposeA = addOwner(token, a);
    const disposeB = addOwner(token, b);
    expect(registry.stats().liveOwners).toBe(2);
    expect(ownersOf(token)).toEqual([a, b]);
    disposeA();
    disposeA();
    expect(registry.stats().liveOwners).toBe(1);
    expect(ownersOf(token)).toEqual([b]);
    disposeB();
    expect(registry.stats().liveOwners).toBe(0);
    expect(ownersOf(token)).toEqual([]);
    registry.endTurn('s');
  });

  it('that are their own list entry (pool tasks) are counted, listed in the order added, told of a cancel, and removed once', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const linked = (): LinkedOwner & { cancels: number; retiredCalls: number } => {
      const o = {
        kind: 'task', settled: Promise.resolve(), hardStop() {}, ownerPrev: undefined, ownerNext: undefined, ownerLinked: false,
        cancels: 0, retiredCalls: 0, onCancel() { o.cancels++; }, onRetire() { o.retiredCalls++; },
      };
      return o;
    };
    const [a, b, c] = [linked(), linked(), linked()];
    const plain = owner('process');
    const disposePlain = addOwner(token, plain);
    for (const o of [a, b, c]) addOwnerOf(token, o);
    addOwnerOf(token, b); // a second add changes nothing
    expect(registry.stats().liveOwners).toBe(4);
    expect(ownersOf(token)).toEqual([plain, a, b, c]);
    removeOwnerOf(token, b);
    removeOwnerOf(token, b);
    expect(registry.stats().liveOwners).toBe(3);
    expect(ownersOf(token)).toEqual([plain, a, c]);
    // A linked owner that removes itself while told leaves the others told all the same.
    a.onCancel = () => { a.cancels++; removeOwnerOf(token, a); };
    token.cancel();
    expect([a.cancels, b.cancels, c.cancels]).toEqual([1, 0, 1]);
    expect(ownersOf(token)).toEqual([plain, c]);
    registry.endTurn('s');
    expect(c.retiredCalls).toBe(1);
    removeOwnerOf(token, c);
    disposePlain();
    expect(registry.stats().liveOwners).toBe(0);
    expect(ownersOf(token)).toEqual([]);
  });

  it("of a token's children count as the token's, but not the other way round", () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const tool = root.child();
    const call = tool.child();
    const rootOwner = owner();
    const toolOwner = owner();
    const callOwner = owner();
    const disposers = [addOwner(root, rootOwner), addOwner(tool, toolOwner), addOwner(call, callOwner)];
    expect(ownersOf(root)).toEqual(expect.arrayContaining([rootOwner, toolOwner, callOwner]));
    expect(ownersOf(root)).toHaveLength(3);
    expect(ownersOf(tool)).toHaveLength(2);
    expect(ownersOf(call)).toEqual([callOwner]);
    for (const dispose of disposers) dispose();
    expect(ownersOf(root)).toEqual([]);
    registry.endTurn('s');
  });

  it('still registered at retire are told once, and stay counted until their disposer runs', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    const o = owner();
    const dispose = addOwner(child, o);
    registry.endTurn('s');
    registry.endTurn('s', root);
    expect(o.retiredCalls).toBe(1);
    // An owner that never disposes is a leak the counters must show.
    expect(registry.stats().liveOwners).toBe(1);
    dispose();
    expect(registry.stats().liveOwners).toBe(0);
  });
});

describe('renderReason', () => {
  it('renders what String() renders, and never throws for what it cannot', () => {
    expect(renderReason('cancel.user')).toBe('cancel.user');
    expect(renderReason(new Error('quota'))).toBe('Error: quota');
    expect(renderReason(42)).toBe('42');
    expect(renderReason(undefined)).toBe('undefined');
    expect(renderReason(10n)).toBe('10');
    expect(renderReason(Symbol('why'))).toBe('Symbol(why)');
    expect(renderReason(Object.create(null))).toBe('[object (null prototype)]');
    class Grumpy { toString(): string { throw new Error('no'); } }
    expect(renderReason(new Grumpy())).toBe('[object Grumpy]');
    expect(renderReason({ toString: () => ({}), valueOf: () => ({}) })).toBe('[object Object]');
    const trap = () => { throw new Error('trap'); };
    expect(renderReason(new Proxy({}, { get: trap, getPrototypeOf: trap }))).toBe('[object Proxy]');
  });
});

describe('errors', () => {
  it('CancelledError carries name, code, reason, sessionId, turnId, hard and cause', () => {
    const cause = new Error('root cause');
    const e = new CancelledError('stopped', { reason: 'timeout', sessionId: 's', turnId: 't', hard: true, cause });
    expect(e).toBeInstanceOf(Error);
    expect(e.name).toBe('CancelledError');
    expect(e.message).toBe('stopped');
    expect(e.code).toBe('ERR_FULLSTOP_CANCELLED');
    expect(e.reason).toBe('timeout');
    expect(e.sessionId).toBe('s');
    expect(e.turnId).toBe('t');
    expect(e.hard).toBe(true);
    expect(e.cause).toBe(cause);
    expect(String(e)).toBe('CancelledError: stopped');

    const plain = new CancelledError();
    expect(plain.message).toBe('cancelled');
    expect(plain.hard).toBe(false);
    expect(plain.reason).toBeUndefined();
    expect('cause' in plain).toBe(false);
  });

  it('isCancelledError is true for a CancelledError and false for anything else', () => {
    expect(isCancelledError(new CancelledError())).toBe(true);
    for (const other of [
      new Error('cancelled'), new Error('CancelledError: in the message only'), new ToolError('x'),
      new FatalToolError('x'), new DOMException('aborted', 'AbortError'), null, undefined, 'CancelledError',
      42, {}, { message: 'CancelledError' },
    ]) {
      expect(isCancelledError(other), String(other)).toBe(false);
    }
  });

  it('isCancelledError is true for a CancelledError that crossed a thread through structuredClone', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    token.cancel();
    let thrown: unknown;
    try { token.throwIfCancelled(); } catch (e) { thrown = e; }
    const cloned = structuredClone(thrown);
    expect(cloned).not.toBeInstanceOf(CancelledError);
    expect(isCancelledError(cloned)).toBe(true);
    expect(isCancelledError(structuredClone(new CancelledError('bare')))).toBe(true);
    registry.endTurn('s');
  });

  async function runReporter(mode: 'post' | 'throw'): Promise<unknown> {
    const registry = fresh();
    const token = registry.beginTurn('s');
    token.cancel();
    const worker = new Worker(new URL('./fixtures/token/report-cancelled-error.mjs', import.meta.url), {
      workerData: { handle: token.handle, mode },
    });
    workers.push(worker);
    const received = await new Promise<unknown>((resolve, reject) => {
      worker.once('message', (m: { error: unknown }) => resolve(m.error));
      worker.once('error', resolve);
      worker.once('exit', (code) => reject(new Error(`worker exited (${code}) without reporting`)));
    });
    await new Promise((resolve) => (worker.threadId === -1 ? resolve(null) : worker.once('exit', resolve)));
    registry.endTurn('s');
    return received;
  }

  it('isCancelledError is true for a CancelledError a worker posted to the main thread', async () => {
    const received = await runReporter('post');
    expect(received).toBeInstanceOf(Error);
    expect(isCancelledError(received)).toBe(true);
  });

  it('isCancelledError is true for a CancelledError thrown uncaught in a worker', async () => {
    const received = await runReporter('throw');
    expect(received).toBeInstanceOf(Error);
    expect(isCancelledError(received)).toBe(true);
  });

  it('ToolError and FatalToolError keep their names and causes', () => {
    const cause = new Error('spawn ENOENT');
    expect(new ToolError('bad args', { cause })).toMatchObject({ name: 'ToolError', message: 'bad args', cause });
    expect(new FatalToolError('give up')).toMatchObject({ name: 'FatalToolError', message: 'give up' });
    expect(new ToolError('x')).toBeInstanceOf(Error);
  });
});

describe('construction', () => {
  it('new CancelToken() throws a TypeError: tokens come from a registry', () => {
    const Ctor = CancelToken as unknown as new (...args: unknown[]) => unknown;
    expect(() => new Ctor()).toThrow(TypeError);
    expect(() => new Ctor({})).toThrow(TypeError);
    expect(() => new Ctor(fresh().beginTurn('s'))).toThrow(TypeError);
    registries.at(-1)!.endTurn('s');
  });

  it('hands out the same CancelToken object for a turn every time', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    expect(registry.currentToken('s')).toBe(token);
    expect(token).toBeInstanceOf(CancelToken);
    registry.endTurn('s');
  });

  it('has a structured-clonable handle that shares the slot', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const handle = structuredClone(token.handle);
    expect(handle.buffer).toBeInstanceOf(SharedArrayBuffer);
    expect(Number.isInteger(handle.index) && handle.index > 0).toBe(true);
    expect(tokenFromHandle(handle).isCancelled()).toBe(false);
    token.cancel();
    expect(tokenFromHandle(handle).isCancelled()).toBe(true);
    registry.endTurn('s');
  });
});
