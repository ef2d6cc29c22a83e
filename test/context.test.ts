/**
 * Ambient binding: runInTurn / runInSession / activeToken / checkCancelled (docs/design.md §3).
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  activeToken, CancelledError, checkCancelled, runInSession, runInTurn, turns, TurnRegistry,
} from '../dist/src/index.js';

const ZERO = { liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 };
const registries: TurnRegistry[] = [turns];

function fresh(): TurnRegistry {
  const registry = new TurnRegistry();
  registries.push(registry);
  return registry;
}

afterEach(() => {
  for (const registry of registries) expect(registry.stats()).toEqual(ZERO);
  registries.splice(1);
  // Nothing stays bound outside the callbacks.
  expect(activeToken()).toBeUndefined();
});

const tick = (ms = 1) => new Promise<void>((resolve) => setTimeout(resolve, ms));

describe('without a binding', () => {
  it('activeToken() is undefined and checkCancelled() is a no-op, even while turns run and are cancelled', () => {
    const registry = fresh();
    registry.beginTurn('s');
    registry.markCancelled('s');
    turns.beginTurn('s');
    turns.markCancelled('s');
    expect(activeToken()).toBeUndefined();
    expect(() => checkCancelled()).not.toThrow();
    registry.endTurn('s');
    turns.endTurn('s');
  });
});

describe('runInTurn', () => {
  it('binds the token for the callback and returns what it returns', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    expect(runInTurn(token, () => activeToken())).toBe(token);
    expect(runInTurn(token, () => 42)).toBe(42);
    expect(activeToken()).toBeUndefined();
    registry.endTurn('s');
  });

  it('makes checkCancelled() throw the CancelledError of the bound token once it is cancelled', () => {
    const registry = fresh();
    const token = registry.beginTurn('s', 'turn-1');
    runInTurn(token, () => {
      expect(() => checkCancelled()).not.toThrow();
      token.cancel('timeout');
      expect(() => checkCancelled()).toThrow(CancelledError);
      try { checkCancelled(); } catch (e) { expect(e).toMatchObject({ reason: 'timeout', sessionId: 's', turnId: 'turn-1' }); }
    });
    registry.endTurn('s');
  });

  it('an inner runInTurn wins over the outer one and the outer comes back after it', () => {
    const registry = fresh();
    const root = registry.beginTurn('s');
    const child = root.child();
    runInTurn(root, () => {
      expect(runInTurn(child, () => activeToken())).toBe(child);
      expect(activeToken()).toBe(root);
    });
    registry.endTurn('s');
  });
});

describe('a bound token wins over a bound session', () => {
  it('when the session is bound outside the token', () => {
    const registry = fresh();
    const current = registry.beginTurn('s');
    const other = registry.beginTurn('other');
    runInSession('s', () => {
      expect(activeToken()).toBe(current);
      runInTurn(other, () => {
        expect(activeToken()).toBe(other);
        registry.markCancelled('s');
        expect(() => checkCancelled()).not.toThrow();
      });
      expect(activeToken()).toBe(current);
      expect(() => checkCancelled()).toThrow(CancelledError);
    }, registry);
    registry.endTurn('s');
    registry.endTurn('other');
  });

  it('when the session is bound inside the token', () => {
    const registry = fresh();
    const current = registry.beginTurn('s');
    const other = registry.beginTurn('other');
    runInTurn(other, () => {
      runInSession('s', () => {
        expect(activeToken()).toBe(other);
        registry.markCancelled('s');
        expect(() => checkCancelled()).not.toThrow();
        other.cancel();
        expect(() => checkCancelled()).toThrow(CancelledError);
      }, registry);
    });
    expect(current.isCancelled()).toBe(true);
    registry.endTurn('s');
    registry.endTurn('other');
  });
});

describe('runInSession', () => {
  it("resolves the session's token at check time, following the session from turn to turn", async () => {
    const registry = fresh();
    // Handshakes between the bound body and the code that begins and ends turns.
    let turnBegun!: () => void;
    const begun = new Promise<void>((resolve) => { turnBegun = resolve; });
    let nextBegun!: () => void;
    const begunAgain = new Promise<void>((resolve) => { nextBegun = resolve; });
    let checked!: () => void;
    const firstChecked = new Promise<void>((resolve) => { checked = resolve; });
    const body = runInSession('s', async () => {
      const seen = [activeToken()?.turnId];
      await begun;
      seen.push(activeToken()?.turnId);
      checked();
      await begunAgain;
      seen.push(activeToken()?.turnId);
      return seen;
    }, registry);
    // The binding was made between turns; both turns begin after it.
    registry.beginTurn('s', 'turn-1');
    turnBegun();
    await firstChecked;
    registry.endTurn('s');
    registry.beginTurn('s', 'turn-2');
    nextBegun();
    expect(await body).toEqual([undefined, 'turn-1', 'turn-2']);
    registry.endTurn('s');
  });

  it('between turns gives no token and a no-op check; the next turn is picked up without rebinding', () => {
    const registry = fresh();
    runInSession('s', () => {
      expect(activeToken()).toBeUndefined();
      expect(() => checkCancelled()).not.toThrow();
      const first = registry.beginTurn('s', 'turn-1');
      expect(activeToken()).toBe(first);
      registry.markCancelled('s');
      expect(() => checkCancelled()).toThrow(CancelledError);
      registry.endTurn('s');
      expect(activeToken()).toBeUndefined();
      expect(() => checkCancelled()).not.toThrow();
      const second = registry.beginTurn('s', 'turn-2');
      expect(activeToken()).toBe(second);
      expect(() => checkCancelled()).not.toThrow();
      registry.endTurn('s');
    }, registry);
  });

  it('uses the default registry `turns` when none is given', () => {
    const token = turns.beginTurn('ctx-default');
    expect(runInSession('ctx-default', () => activeToken())).toBe(token);
    expect(runInSession('ctx-default', () => activeToken(), fresh())).toBeUndefined();
    turns.endTurn('ctx-default');
  });

  it('an inner session binding replaces the outer one', () => {
    const registry = fresh();
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    runInSession('a', () => {
      expect(runInSession('b', () => activeToken(), registry)).toBe(b);
      expect(activeToken()).toBe(a);
    }, registry);
    registry.endTurn('a');
    registry.endTurn('b');
  });
});

describe('the binding survives awaits', () => {
  it('across setTimeout, setImmediate, queueMicrotask and promise chains', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const seen = await runInTurn(token, async () => {
      const out: unknown[] = [activeToken()];
      await tick();
      out.push(activeToken());
      await new Promise<void>((resolve) => setTimeout(() => { out.push(activeToken()); resolve(); }, 1));
      await new Promise<void>((resolve) => setImmediate(() => { out.push(activeToken()); resolve(); }));
      await new Promise<void>((resolve) => queueMicrotask(() => { out.push(activeToken()); resolve(); }));
      await Promise.resolve().then(() => tick()).then(() => out.push(activeToken()));
      return out;
    });
    expect(seen).toHaveLength(6);
    for (const t of seen) expect(t).toBe(token);
    registry.endTurn('s');
  });

  it('and a cancel made while awaiting is seen by the check after the await', async () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const body = runInTurn(token, async () => {
      checkCancelled();
      await tick(5);
      checkCancelled();
      return 'finished';
    });
    token.cancel('cancel.user');
    await expect(body).rejects.toBeInstanceOf(CancelledError);
    registry.endTurn('s');
  });

  it('and concurrent bindings never see each other', async () => {
    const registry = fresh();
    const tokens = Array.from({ length: 5 }, (_, i) => registry.beginTurn(`s${i}`));
    const results = await Promise.all(tokens.map((token, i) => runInTurn(token, async () => {
      const out: unknown[] = [];
      for (let step = 0; step < 5; step++) {
        await tick((i * 7 + step * 3) % 4);
        out.push(activeToken());
      }
      return out;
    })));
    results.forEach((seen, i) => { for (const t of seen) expect(t).toBe(tokens[i]); });
    for (let i = 0; i < 5; i++) registry.endTurn(`s${i}`);
  });

  it('session bindings across awaits follow the session as well', async () => {
    const registry = fresh();
    const first = registry.beginTurn('s');
    const seen = runInSession('s', async () => {
      const out = [activeToken()];
      await tick();
      out.push(activeToken());
      return out;
    }, registry);
    registry.endTurn('s');
    const second = registry.beginTurn('s');
    expect(await seen).toEqual([first, second]);
    registry.endTurn('s');
  });
});

describe('bad input', () => {
  it('runInTurn rejects a non-token or a non-function with a TypeError and runs nothing', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    let ran = false;
    for (const bad of [undefined, null, {}, 's', token.handle]) {
      expect(() => runInTurn(bad as never, () => { ran = true; })).toThrow(TypeError);
    }
    for (const bad of [undefined, null, 'fn', {}]) {
      expect(() => runInTurn(token, bad as never)).toThrow(TypeError);
    }
    expect(ran).toBe(false);
    registry.endTurn('s');
  });

  it('refuses a lookalike whose every read throws with the TypeError naming token, not the lookalike\'s error', () => {
    const hostile = new Proxy({}, { get() { throw new Error('read me and die'); } });
    let ran = false;
    expect(() => runInTurn(hostile as never, () => { ran = true; })).toThrow(/^token: expected a CancelToken, got an object \(Object\)$/);
    const revocable = Proxy.revocable({}, {});
    revocable.revoke();
    expect(() => runInTurn(revocable.proxy as never, () => { ran = true; })).toThrow(/^token: expected a CancelToken, got an object \(Proxy\)$/);
    const bare = Object.create(null) as object;
    expect(() => runInTurn(bare as never, () => { ran = true; })).toThrow(/^token: expected a CancelToken, got an object \(\(null prototype\)\)$/);
    expect(ran).toBe(false);
  });

  it('runInSession rejects a bad session id, function or registry with a TypeError and runs nothing', () => {
    let ran = false;
    const fn = () => { ran = true; };
    for (const bad of ['', undefined, null, 1, {}]) {
      expect(() => runInSession(bad as never, fn)).toThrow(TypeError);
    }
    for (const bad of [undefined, null, 'fn', {}]) {
      expect(() => runInSession('s', bad as never)).toThrow(TypeError);
    }
    for (const bad of [null, {}, 'turns', 5]) {
      expect(() => runInSession('s', fn, bad as never)).toThrow(TypeError);
    }
    expect(ran).toBe(false);
  });

  it('an error thrown by the callback passes through unchanged and unbinds', () => {
    const registry = fresh();
    const token = registry.beginTurn('s');
    const boom = new Error('boom');
    expect(() => runInTurn(token, () => { throw boom; })).toThrow(boom);
    expect(activeToken()).toBeUndefined();
    registry.endTurn('s');
  });
});
