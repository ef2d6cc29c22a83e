/**
 * TurnRegistry: one current token per session, and the rules that keep a stop inside the turn it
 * was meant for (docs/design.md §1 invariants 2–4, §3).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { getEventListeners } from 'node:events';
import { CancelToken, TurnRegistry } from '../dist/src/index.js';
import { tokenFromHandle } from '../dist/workers/runtime.js';

const ZERO = { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 };
const registries: TurnRegistry[] = [];

function fresh(options?: { slots?: number }): TurnRegistry {
  const registry = new TurnRegistry(options);
  registries.push(registry);
  return registry;
}

afterEach(() => {
  for (const registry of registries.splice(0)) expect(registry.stats()).toEqual(ZERO);
});

describe('a stop', () => {
  it('between turns is a no-op: markCancelled returns false and the next turn starts clean', () => {
    const registry = fresh();
    expect(registry.markCancelled('s')).toBe(false);
    expect(registry.isCancelled('s')).toBe(false);
    expect(registry.currentToken('s')).toBeUndefined();
    const first = registry.beginTurn('s');
    registry.endTurn('s', first);
    expect(registry.markCancelled('s', 'late')).toBe(false);
    expect(registry.isCancelled('s')).toBe(false);
    const next = registry.beginTurn('s');
    expect(next.isCancelled()).toBe(false);
    expect(first.isCancelled()).toBe(false);
    expect(registry.stats()).toMatchObject({ liveTokens: 1 });
    registry.endTurn('s', next);
  });

  it('trips only the running turn, with reason cancel.session by default', () => {
    const registry = fresh();
    const before = registry.beginTurn('s', 'turn-1');
    registry.endTurn('s', before);
    const running = registry.beginTurn('s', 'turn-2');
    expect(registry.markCancelled('s')).toBe(true);
    expect(running.isCancelled()).toBe(true);
    expect(running.reason).toBe('cancel.session');
    expect(registry.isCancelled('s')).toBe(true);
    expect(before.isCancelled()).toBe(false);
    expect(registry.markCancelled('s', 'other')).toBe(true);
    expect(running.reason).toBe('cancel.session');
    registry.endTurn('s', running);
    const after = registry.beginTurn('s', 'turn-3');
    expect(after.isCancelled()).toBe(false);
    registry.endTurn('s', after);
  });

  it('in a cancelled turn does not poison the next turn', () => {
    const registry = fresh();
    const cancelled = registry.beginTurn('s');
    registry.markCancelled('s', 'cancel.user');
    registry.endTurn('s', cancelled);
    expect(registry.isCancelled('s')).toBe(false);
    const next = registry.beginTurn('s');
    expect(next.isCancelled()).toBe(false);
    expect(next.signal.aborted).toBe(false);
    expect(() => next.throwIfCancelled()).not.toThrow();
    expect(registry.isCancelled('s')).toBe(false);
    expect(next.handle.index).toBeGreaterThan(0);
    expect(tokenFromHandle(next.handle).isCancelled()).toBe(false);
    registry.endTurn('s', next);
  });

  it('that arrives late lands on the retired token and never reaches the next turn', () => {
    const registry = fresh();
    const old = registry.beginTurn('s');
    const oldHandle = old.handle;
    registry.endTurn('s', old);
    const next = registry.beginTurn('s');
    // A late stop holding the old token, and a late stop from a thread holding its handle.
    expect(old.cancel('late')).toBe(false);
    expect(tokenFromHandle(oldHandle).cancel('late')).toBe(false);
    expect(old.isCancelled()).toBe(false);
    expect(next.isCancelled()).toBe(false);
    expect(registry.isCancelled('s')).toBe(false);
    registry.endTurn('s', next);
  });
});

describe('beginTurn / endTurn', () => {
  it('cancel() returns false once the turn has ended', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    expect(token.cancel()).toBe(true);
    registry.endTurn('s');
    expect(token.retired).toBe(true);
    expect(token.cancel()).toBe(false);
  });

  it('beginning twice retires the leftover token of the session', () => {
    const registry = fresh();
    const leftover = registry.beginTurn('s', 'turn-1');
    const child = leftover.child();
    const next = registry.beginTurn('s', 'turn-2');
    expect(leftover.retired).toBe(true);
    expect(child.retired).toBe(true);
    expect(leftover.signal.aborted).toBe(false);
    expect(next).not.toBe(leftover);
    expect(registry.currentToken('s')).toBe(next);
    expect(next.turnId).toBe('turn-2');
    expect(registry.stats()).toMatchObject({ liveTokens: 1, liveSlots: 1 });
    registry.endTurn('s');
  });

  it('a late endTurn(s, old) never retires its successor', () => {
    const registry = fresh();
    const old = registry.beginTurn('s');
    const next = registry.beginTurn('s');
    registry.endTurn('s', old);
    expect(next.retired).toBe(false);
    expect(registry.currentToken('s')).toBe(next);
    registry.endTurn('s', old);
    expect(registry.currentToken('s')).toBe(next);
    registry.endTurn('s', next);
    expect(registry.currentToken('s')).toBeUndefined();
  });

  it('endTurn(s, token) of the current token ends the turn; endTurn(s) between turns does nothing', () => {
    const registry = fresh();
    registry.endTurn('s');
    const token = registry.beginTurn('s');
    registry.endTurn('s', token);
    expect(registry.currentToken('s')).toBeUndefined();
    expect(registry.isCancelled('s')).toBe(false);
    registry.endTurn('s');
  });

  it('endTurn(s, child) retires only that child and leaves the turn running', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    registry.endTurn('s', child);
    expect(child.retired).toBe(true);
    expect(root.retired).toBe(false);
    expect(registry.currentToken('s')).toBe(root);
    registry.endTurn('s');
  });

  it('a token retired directly stops being the current token', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    token.retire();
    expect(registry.currentToken('s')).toBeUndefined();
    expect(registry.markCancelled('s')).toBe(false);
  });

  it('keeps sessions isolated: a stop, an end or a begin of one never touches another', () => {
    const registry = fresh();
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    expect(registry.markCancelled('a')).toBe(true);
    expect(b.isCancelled()).toBe(false);
    expect(registry.isCancelled('b')).toBe(false);
    registry.endTurn('a');
    expect(b.retired).toBe(false);
    expect(registry.currentToken('b')).toBe(b);
    const a2 = registry.beginTurn('a');
    expect(b.retired).toBe(false);
    registry.clearCancel('a');
    expect(registry.currentToken('b')).toBe(b);
    expect(a.retired && a2.retired).toBe(true);
    registry.endTurn('b');
  });
});

describe('re-entrancy', () => {
  it('an abort listener that begins a turn while beginTurn retires the leftover leaves exactly one live turn', () => {
    // The leftover was cancelled from another thread and nobody has read it yet, so the cancel
    // is folded in (and its listeners run) inside beginTurn's retire of the leftover.
    const registry = fresh({ slots: 4 });
    const leftover = registry.beginTurn('s', 'turn-1');
    let begunByListener: CancelToken | undefined;
    leftover.signal.addEventListener('abort', () => { begunByListener = registry.beginTurn('s', 'from-listener'); });
    expect(tokenFromHandle(leftover.handle).cancel()).toBe(true);
    const next = registry.beginTurn('s', 'turn-2');
    expect(leftover.signal.aborted).toBe(true);
    expect(begunByListener).toBeDefined();
    // The listener's turn is a leftover too: retired, not orphaned behind the new turn.
    expect(begunByListener!.retired).toBe(true);
    expect(registry.currentToken('s')).toBe(next);
    expect(registry.stats()).toMatchObject({ liveTokens: 1, liveSlots: 1 });
    // Every live token owns its own (cell, generation).
    const other = registry.beginTurn('t');
    const cells = [next, other].map((t) => `${t.handle.index}/${t.handle.generation}`);
    expect(new Set(cells).size).toBe(2);
    registry.endTurn('s');
    expect(next.retired).toBe(true);
    expect(other.isCancelled()).toBe(false);
    registry.endTurn('t');
  });

  it('an abort listener that ends the turn while registerCancelEvent retires the leftover releases it once', () => {
    const registry = fresh({ slots: 2 });
    const leftover = registry.beginTurn('s');
    leftover.signal.addEventListener('abort', () => registry.endTurn('s'));
    tokenFromHandle(leftover.handle).cancel();
    const adopted = registry.registerCancelEvent('s', new AbortController());
    expect(leftover.retired).toBe(true);
    expect(registry.currentToken('s')).toBe(adopted);
    expect(registry.stats()).toMatchObject({ liveTokens: 1, liveSlots: 1 });
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    expect(new Set([adopted, a, b].map((t) => `${t.handle.buffer === a.handle.buffer}/${t.handle.index}/${t.handle.generation}`)).size).toBe(3);
    for (const session of ['s', 'a', 'b']) registry.endTurn(session);
  });
});

describe('clearCancel', () => {
  it("retires the session's token: isCancelled turns false and the next turn is clean", () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    registry.markCancelled('s');
    expect(registry.isCancelled('s')).toBe(true);
    registry.clearCancel('s');
    expect(token.retired).toBe(true);
    expect(registry.isCancelled('s')).toBe(false);
    expect(registry.currentToken('s')).toBeUndefined();
    registry.clearCancel('s');
    const next = registry.beginTurn('s');
    expect(next.isCancelled()).toBe(false);
    registry.endTurn('s');
  });
});

describe('registerCancelEvent', () => {
  it("aborting the caller's controller cancels the token", () => {
    const registry = fresh();
    const controller = new AbortController();
    const token = registry.registerCancelEvent('s', controller);
    expect(token).toBeInstanceOf(CancelToken);
    expect(registry.currentToken('s')).toBe(token);
    expect(token.isCancelled()).toBe(false);
    controller.abort('cancel.user');
    expect(token.isCancelled()).toBe(true);
    expect(token.reason).toBe('cancel.user');
    expect(registry.isCancelled('s')).toBe(true);
    expect(token.signal).toBe(controller.signal);
    registry.endTurn('s', token);
  });

  it("cancelling the token (or marking the session) aborts the caller's controller once", () => {
    const registry = fresh();
    const controller = new AbortController();
    let aborts = 0;
    controller.signal.addEventListener('abort', () => aborts++);
    const token = registry.registerCancelEvent('s', controller);
    const child = token.child();
    expect(registry.markCancelled('s', 'stop')).toBe(true);
    token.cancel('again');
    expect(controller.signal.aborted).toBe(true);
    expect(aborts).toBe(1);
    expect(token.reason).toBe('stop');
    expect(child.isCancelled()).toBe(true);
    registry.endTurn('s');
  });

  it('a newer registration retires the older token and detaches it from its controller', () => {
    const registry = fresh();
    const oldController = new AbortController();
    const old = registry.registerCancelEvent('s', oldController);
    const newController = new AbortController();
    expect(getEventListeners(oldController.signal, 'abort')).toHaveLength(1);
    const next = registry.registerCancelEvent('s', newController);
    expect(old.retired).toBe(true);
    // Retired means detached: the library keeps no listener on a controller it no longer uses.
    expect(getEventListeners(oldController.signal, 'abort')).toHaveLength(0);
    expect(getEventListeners(newController.signal, 'abort')).toHaveLength(1);
    expect(registry.currentToken('s')).toBe(next);
    oldController.abort('late');
    expect(old.isCancelled()).toBe(false);
    expect(next.isCancelled()).toBe(false);
    expect(registry.isCancelled('s')).toBe(false);
    expect(newController.signal.aborted).toBe(false);
    registry.endTurn('s');
    expect(getEventListeners(newController.signal, 'abort')).toHaveLength(0);
    // Once ended, aborting its controller reaches nothing either.
    newController.abort('late');
    expect(next.isCancelled()).toBe(false);
  });

  it('retires a token made by beginTurn, and beginTurn retires a registered one', () => {
    const registry = fresh();
    const begun = registry.beginTurn('s');
    const controller = new AbortController();
    const registered = registry.registerCancelEvent('s', controller);
    expect(begun.retired).toBe(true);
    const next = registry.beginTurn('s');
    expect(registered.retired).toBe(true);
    controller.abort();
    expect(next.isCancelled()).toBe(false);
    registry.endTurn('s');
  });

  it('adopting an already aborted controller gives an already cancelled token', () => {
    const registry = fresh();
    const controller = new AbortController();
    controller.abort('before');
    const token = registry.registerCancelEvent('s', controller);
    expect(token.isCancelled()).toBe(true);
    expect(token.reason).toBe('before');
    registry.endTurn('s');
  });
});

describe('a reason String() cannot render', () => {
  /** Reasons whose String() throws (or that a template literal refuses), each named for the report. */
  function unprintable(): Array<[string, unknown]> {
    return [
      ['Object.create(null)', Object.create(null)],
      ['a throwing toString', { toString() { throw new Error('no text for you'); } }],
      ['a toString returning an object', { toString() { return {}; }, valueOf() { return {}; } }],
      ['a Symbol', Symbol('why')],
    ];
  }

  it('is kept as given, and the cancel goes all the way: slot, signal and children', () => {
    for (const [name, reason] of unprintable()) {
      const registry = fresh();
      const token = registry.beginTurn('s', 't');
      const child = token.child();
      const signals = [token.signal, child.signal];
      const cancelled = token.cancel(reason);
      expect(cancelled, name).toBe(true);
      expect(token.reason, name).toBe(reason);
      expect(child.reason, name).toBe('cancel.parent');
      expect(signals.map((s) => s.aborted), name).toEqual([true, true]);
      expect((token.signal.reason as { reason: unknown }).reason, name).toBe(reason);
      expect((token.signal.reason as Error).message, name).toMatch(/^turn t of session s was cancelled: \S/);
      expect(tokenFromHandle(token.handle).isCancelled(), name).toBe(true);
      expect(() => token.throwIfCancelled(), name).toThrow(/was cancelled/);
      registry.endTurn('s', token);
    }
  });

  it('given to markCancelled aborts a signal that was read before, and one read after', () => {
    for (const [name, reason] of unprintable()) {
      const registry = fresh();
      const token = registry.beginTurn('s');
      const early = token.signal;
      expect(registry.markCancelled('s', reason), name).toBe(true);
      expect(early.aborted, name).toBe(true);
      const late = registry.beginTurn('s2');
      late.cancel(reason);
      expect(late.signal.aborted, name).toBe(true);
      expect((late.signal.reason as { reason: unknown }).reason, name).toBe(reason);
      registry.endTurn('s', token);
      registry.endTurn('s2', late);
    }
  });

  it("aborting an adopted controller with it cancels the token and throws nothing uncaught", async () => {
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    try {
      for (const [name, reason] of unprintable()) {
        const registry = fresh();
        const controller = new AbortController();
        const token = registry.registerCancelEvent('s', controller);
        const child = token.child();
        const childSignal = child.signal;
        controller.abort(reason);
        expect(token.isCancelled(), name).toBe(true);
        expect(token.reason, name).toBe(reason);
        expect(childSignal.aborted, name).toBe(true);
        // Listener errors reach 'uncaughtException' on a later tick: let one pass.
        await new Promise((resolve) => setImmediate(resolve));
        expect(uncaught, name).toEqual([]);
        registry.endTurn('s', token);
      }
    } finally {
      process.off('uncaughtException', onUncaught);
    }
  });
});

describe('pause / resume', () => {
  it('paused reports the last pause() or resume(), and is independent of tokens', () => {
    const registry = fresh();
    expect(registry.paused).toBe(false);
    registry.pause();
    registry.pause();
    expect(registry.paused).toBe(true);
    const token = registry.beginTurn('s');
    expect(token.isCancelled()).toBe(false);
    registry.markCancelled('s');
    expect(registry.paused).toBe(true);
    registry.resume();
    expect(registry.paused).toBe(false);
    registry.resume();
    expect(registry.paused).toBe(false);
    registry.endTurn('s');
    expect(fresh().paused).toBe(false);
  });
});

describe('stats()', () => {
  it('counts live tokens, slots and bridges, and returns to zero when the turns end', () => {
    const registry = fresh();
    expect(registry.stats()).toEqual(ZERO);
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    const child = a.child();
    expect(registry.stats()).toEqual({ liveTokens: 3, liveSlots: 3, liveBridges: 0, liveOwners: 0 });
    // A handle leaving the thread arms its slab's bridge (one per slab, however many handles).
    void a.handle;
    void a.handle;
    void child.handle;
    expect(registry.stats().liveBridges).toBe(1);
    // A cancelled token stays watched until it retires; with no exported token left, the bridge goes.
    a.cancel();
    expect(registry.stats().liveBridges).toBe(1);
    registry.endTurn('a');
    expect(registry.stats().liveBridges).toBe(0);
    void b.handle;
    expect(registry.stats().liveBridges).toBe(1);
    registry.endTurn('b');
    expect(registry.stats()).toEqual(ZERO);
  });

  it('of one registry never counts another registry', () => {
    const one = fresh();
    const two = fresh();
    one.beginTurn('s');
    expect(two.stats()).toEqual(ZERO);
    expect(two.currentToken('s')).toBeUndefined();
    one.endTurn('s');
  });
});

describe('bad input', () => {
  function snapshot(registry: TurnRegistry) {
    return { stats: registry.stats(), current: registry.currentToken('s'), cancelled: registry.isCancelled('s') };
  }

  it('rejects an empty or non-string session id with a TypeError and leaves the state unchanged', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const before = snapshot(registry);
    const calls: Array<[string, (id: unknown) => unknown]> = [
      ['beginTurn', (id) => registry.beginTurn(id as string)],
      ['endTurn', (id) => registry.endTurn(id as string)],
      ['endTurn with token', (id) => registry.endTurn(id as string, token)],
      ['currentToken', (id) => registry.currentToken(id as string)],
      ['markCancelled', (id) => registry.markCancelled(id as string)],
      ['isCancelled', (id) => registry.isCancelled(id as string)],
      ['clearCancel', (id) => registry.clearCancel(id as string)],
      ['registerCancelEvent', (id) => registry.registerCancelEvent(id as string, new AbortController())],
    ];
    for (const [name, call] of calls) {
      for (const bad of ['', undefined, null, 42, {}, ['s'], Symbol('s')]) {
        expect(() => call(bad), `${name}(${String(bad)})`).toThrow(TypeError);
        expect(snapshot(registry)).toEqual(before);
      }
    }
    expect(token.isCancelled()).toBe(false);
    registry.endTurn('s');
  });

  it('rejects a bad turnId with a TypeError before retiring anything', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const before = snapshot(registry);
    for (const bad of ['', 7, null, {}]) {
      expect(() => registry.beginTurn('s', bad as string)).toThrow(TypeError);
      expect(snapshot(registry)).toEqual(before);
      expect(token.retired).toBe(false);
    }
    registry.endTurn('s');
  });

  it('rejects slots that are not a positive integer with a RangeError', () => {
    for (const slots of [0, -1, 1.5, NaN, Infinity, '4']) {
      expect(() => new TurnRegistry({ slots: slots as number }), `slots ${String(slots)}`).toThrow(RangeError);
    }
    expect(() => new TurnRegistry(null as never)).toThrow(TypeError);
    expect(fresh({ slots: 1 }).stats()).toEqual(ZERO);
    expect(fresh({}).stats()).toEqual(ZERO);
  });

  it('refuses slots too large for one slab with a RangeError naming the limit, at construction', () => {
    // 1e8 slots would be a 400 MB buffer and a 1e8-entry free list, allocated at the first
    // beginTurn; that allocation ended the process instead of failing a call.
    for (const slots of [1e8, 2 ** 20 + 1]) {
      expect(() => new TurnRegistry({ slots }), `slots ${slots}`).toThrow(RangeError);
      expect(() => new TurnRegistry({ slots }), `slots ${slots}`).toThrow(/options\.slots: expected an integer from 1 to 1048576.*got 1/);
    }
    const largest = fresh({ slots: 2 ** 20 });
    const token = largest.beginTurn('s');
    expect(largest.stats()).toMatchObject({ liveSlots: 1 });
    largest.endTurn('s', token);
  });

  it('rejects registerCancelEvent with something that is not an AbortController, leaving the turn running', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const before = snapshot(registry);
    const lookalike = { signal: new AbortController().signal, abort() {} };
    for (const bad of [undefined, null, {}, lookalike, new AbortController().signal, 'controller']) {
      expect(() => registry.registerCancelEvent('s', bad as AbortController)).toThrow(TypeError);
      expect(snapshot(registry)).toEqual(before);
      expect(token.retired).toBe(false);
    }
    registry.endTurn('s');
  });

  it('rejects endTurn with a token of another session or registry, or a non-token, leaving both turns running', () => {
    const registry = fresh();
    const other = fresh();
    const mine = registry.beginTurn('s');
    const theirs = registry.beginTurn('t');
    const foreign = other.beginTurn('s');
    const before = snapshot(registry);
    expect(() => registry.endTurn('s', theirs)).toThrow(TypeError);
    expect(() => registry.endTurn('s', foreign)).toThrow(TypeError);
    expect(() => registry.endTurn('s', {} as CancelToken)).toThrow(TypeError);
    expect(snapshot(registry)).toEqual(before);
    expect([mine.retired, theirs.retired, foreign.retired]).toEqual([false, false, false]);
    registry.endTurn('s');
    registry.endTurn('t');
    other.endTurn('s');
  });
});

describe('slab growth', () => {
  it('a registry with 2 slots a slab runs 10 live tokens, and all of them retire to zero', () => {
    const registry = fresh({ slots: 2 });
    const tokens = Array.from({ length: 10 }, (_, i) => registry.beginTurn(`s${i}`));
    const children = tokens.map((t) => t.child());
    expect(registry.stats()).toMatchObject({ liveTokens: 20, liveSlots: 20 });
    const cells = new Set(tokens.concat(children).map((t) => `${t.handle.index}@${bufferId(t.handle.buffer)}`));
    expect(cells.size).toBe(20);
    expect(new Set(tokens.concat(children).map((t) => t.handle.buffer)).size).toBe(10);
    // Each token is its own: cancelling one, from either side, moves that one only.
    tokens[3].cancel();
    tokenFromHandle(tokens[7].handle).cancel();
    expect(tokens.map((t) => t.isCancelled())).toEqual(tokens.map((_, i) => i === 3 || i === 7));
    expect(children.map((t) => t.isCancelled())).toEqual(tokens.map((_, i) => i === 3 || i === 7));
    for (let i = 0; i < 10; i++) registry.endTurn(`s${i}`);
    expect(registry.stats()).toEqual(ZERO);
    // The freed cells are reused: ten more turns add no slab.
    const before = buffers.size;
    for (let i = 0; i < 10; i++) bufferId(registry.beginTurn(`s${i}`).handle.buffer);
    expect(buffers.size).toBe(before);
    for (let i = 0; i < 10; i++) registry.endTurn(`s${i}`);
  });

  it('a stale handle of a reused cell can neither cancel nor read the new owner', () => {
    const registry = fresh({ slots: 1 });
    const old = registry.beginTurn('s');
    const oldHandle = old.handle;
    registry.endTurn('s');
    const next = registry.beginTurn('s');
    // Same cell, a later generation.
    expect(next.handle.buffer).toBe(oldHandle.buffer);
    expect(next.handle.index).toBe(oldHandle.index);
    expect(next.handle.generation).not.toBe(oldHandle.generation);
    const stale = tokenFromHandle(oldHandle);
    expect(stale.isCancelled()).toBe(true);
    expect(() => stale.checkCancelled()).toThrow();
    expect(stale.cancel()).toBe(false);
    expect(next.isCancelled()).toBe(false);
    // Once the new owner is cancelled, the stale holder still does not read it as its own cancel.
    next.cancel();
    expect(stale.cancel()).toBe(false);
    registry.endTurn('s');
    const third = registry.beginTurn('s');
    expect(stale.cancel()).toBe(false);
    expect(tokenFromHandle(next.handle).cancel()).toBe(false);
    expect(third.isCancelled()).toBe(false);
    registry.endTurn('s');
  });
});

// Identity of SharedArrayBuffers seen so far (to count slabs from the outside).
const buffers = new Map<SharedArrayBuffer, number>();
function bufferId(buffer: SharedArrayBuffer): number {
  if (!buffers.has(buffer)) buffers.set(buffer, buffers.size);
  return buffers.get(buffer)!;
}
