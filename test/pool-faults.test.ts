import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { relative } from 'node:path';
import { MessagePort } from 'node:worker_threads';
import { TurnPool, TurnRegistry, isCancelledError, runInTurn } from '../dist/src/index.js';
import { flags, started } from './support/handshake.js';
import { rejection } from './support/rejection.js';

const fixture = (name: string) => new URL(`./fixtures/pool/${name}`, import.meta.url).href;
const tasks = fixture('tasks.mjs');
const registry = new TurnRegistry();
const pools: TurnPool[] = [];
const unhandled: unknown[] = [];
const onUnhandled = (reason: unknown) => { unhandled.push(reason); };

function pool(options: Record<string, unknown> = {}): TurnPool {
  const p = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 1, ...options });
  pools.push(p);
  return p;
}

/** Lets pending rejections surface as 'unhandledRejection' before the test looks. */
async function settleEvents(): Promise<void> {
  for (let i = 0; i < 3; i++) await new Promise((resolve) => setImmediate(resolve));
}

beforeAll(() => { process.on('unhandledRejection', onUnhandled); });

afterEach(async () => {
  for (const s of ['s', 'a', 'b']) registry.endTurn(s);
  await settleEvents();
  expect(unhandled).toEqual([]);
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

afterAll(async () => {
  process.off('unhandledRejection', onUnhandled);
  await Promise.all(pools.map((p) => p.destroy()));
});

describe('errors name their cause when a worker module cannot serve a task', () => {
  it('a throw at import rejects with that error, every time, and the pool still serves other modules', async () => {
    const p = pool({ filename: fixture('throws-at-import.cjs') });
    const token = registry.beginTurn('s');
    await expect(p.run(1)).rejects.toThrow('boom at import');
    await expect(p.run(1, { token })).rejects.toThrow('boom at import');
    await expect(p.run({ value: 4 }, { filename: tasks, name: 'echo' })).resolves.toMatchObject({ value: 4 });
  });

  it('a missing file says "Cannot find module", as piscina does', async () => {
    const p = pool({ filename: fixture('no-such-file.mjs') });
    await expect(p.run(1)).rejects.toThrow(/Cannot find module .*no-such-file\.mjs/);
  });

  it('a missing export names the file and the export', async () => {
    const p = pool();
    await expect(p.run(1, { name: 'noSuchExport' })).rejects.toThrow(/No handler function exported from .*tasks\.mjs: its export "noSuchExport" is missing/);
  });

  it('an empty filename is a TypeError at the call; a ./relative one is taken from the current directory', async () => {
    const p = pool();
    await expect(p.run(1, { filename: '' })).rejects.toThrow(TypeError);
    const rel = `./${relative(process.cwd(), new URL(tasks).pathname)}`;
    await expect(p.run({ value: 5 }, { filename: rel, name: 'echo' })).resolves.toMatchObject({ value: 5 });
  });

  it('a module with top-level await loads (through import()), as does one whose export is a promise of the handler', async () => {
    const p = pool();
    const token = registry.beginTurn('s');
    await expect(p.run(1, { filename: fixture('top-level-await.mjs'), token })).resolves.toEqual({ ready: 'ready', task: 1 });
    await expect(p.run(2, { filename: fixture('async-init.cjs') })).resolves.toEqual({ initialised: true, task: 2 });
  });

  it('a function export with named handlers runs the one named (not the default)', async () => {
    const p = pool({ filename: fixture('multi-export.cjs') });
    const token = registry.beginTurn('s');
    await expect(p.run({ a: 3, b: 4 })).resolves.toBe(7);
    await expect(p.run({ a: 3, b: 4 }, { name: 'multiply', token })).resolves.toBe(12);
  });

  it('a result or a thrown value that cannot be cloned rejects with an error saying so, and the worker lives on', async () => {
    const p = pool({ filename: fixture('uncloneable.mjs') });
    const token = registry.beginTurn('s');
    const before = await p.run({ value: 0 }, { filename: tasks, name: 'echo' }) as { threadId: number };
    const e = await rejection(p.run(null, { name: 'fn', token }));
    expect(e.message).toMatch(/the task's result cannot be sent to the main thread \(DataCloneError: .*could not be cloned/);
    await expect(p.run(null, { name: 'throwsFn' })).rejects.toThrow(/the error the task threw cannot be sent to the main thread/);
    await expect(p.run(null, { name: 'rejectsFn', token })).rejects.toThrow(/the error the task threw cannot be sent to the main thread/);
    const after = await p.run({ value: 0 }, { filename: tasks, name: 'echo' }) as { threadId: number };
    expect(after.threadId).toBe(before.threadId);
  });

  it('a moved result whose wrapper and value could not be cloned is transferred, with a token or without', async () => {
    const p = pool({ filename: fixture('uncloneable.mjs') });
    const token = registry.beginTurn('s');
    for (const options of [{ name: 'movesPort', token }, { name: 'movesPort' }]) {
      const port = await p.run(null, options);
      expect(port).toBeInstanceOf(MessagePort);
      (port as MessagePort).close();
    }
  });

  it("the worker's MessagePort is Node's own: a task's own post of an uncloneable message throws, even shaped like piscina's response", async () => {
    const p = pool({ filename: fixture('uncloneable.mjs') });
    const token = registry.beginTurn('s');
    await expect(p.run(null, { name: 'postsOwnMessage', token })).resolves.toEqual({ outcome: 'threw DataCloneError', native: true });
  });

  it('a worker that exits while loading its module fails that task, and the next task does not hang', async () => {
    const p = pool({ filename: fixture('exits-at-import.cjs') });
    await expect(p.run(1)).rejects.toThrow(/worker exited with code: 3/);
    await expect(p.run(2)).rejects.toThrow(/worker exited with code: 3/);
    await expect(p.run({ value: 6 }, { filename: tasks, name: 'echo' })).resolves.toMatchObject({ value: 6 });
  }, 20_000);
});

describe('per-task binding', () => {
  it('a timer left behind by a finished task sees a retired token, not the token of the task running when it fires', async () => {
    const p = pool({ filename: fixture('leftovers.mjs') });
    const f = flags3();
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    await expect(p.run({ flags: f }, { name: 'leavesTimer', token: a })).resolves.toBe('left');
    // Task B awaits on the same worker: the only time A's timer can fire.
    const taskB = p.run({ flags: f }, { name: 'awaitsRelease', token: b });
    await started(f);
    const r = Atomics.waitAsync(f, 1, 0, 5000);
    if (r.async) await r.value;
    expect(Atomics.load(f, 1)).toBe(1); // 1: the leftover saw "over"; 2: it saw B's running token
    expect(a.isCancelled()).toBe(false);
    Atomics.store(f, 2, 1);
    Atomics.notify(f, 2);
    await expect(taskB).resolves.toBe('released');
  });

  it('two tasks interleaved on one worker each see their own token, before and after their awaits', async () => {
    const p = pool({ filename: fixture('leftovers.mjs'), concurrentTasksPerWorker: 2 });
    const f = flags3();
    const a = registry.beginTurn('a');
    const b = registry.beginTurn('b');
    const taskA = p.run({ flags: f }, { name: 'checksAcrossRelease', token: a, graceMs: 10_000 });
    const taskB = p.run({ flags: f }, { name: 'checksAcrossRelease', token: b });
    while (Atomics.load(f, 0) < 2) {
      const r = Atomics.waitAsync(f, 0, Atomics.load(f, 0), 5000);
      if (r.async) await r.value;
    }
    a.cancel();
    Atomics.store(f, 2, 1);
    Atomics.notify(f, 2);
    // B's handler ran while A awaited, and A resumed after B's had returned: neither saw the other's.
    await expect(taskA).resolves.toEqual([false, true]);
    await expect(taskB).resolves.toEqual([false, false]);
  });

  it("a check bound to an earlier task's async context, called synchronously by a later task's handler, runs as part of that handler", async () => {
    const p = pool({ filename: fixture('leftovers.mjs') });
    const a = registry.beginTurn('a');
    await expect(p.run(null, { name: 'bindsCheck', token: a })).resolves.toBe('bound');
    const b = registry.beginTurn('b');
    // The documented reading (workers/current.ts): the running handler's binding, B's live token.
    await expect(p.run(null, { name: 'callsBoundCheck', token: b })).resolves.toEqual([false, false]);
  });
});

describe('no input crashes, hangs or corrupts', () => {
  it("a task error whose message starts with the pool's internal prefix rejects once, with that error, and runs once", async () => {
    const p = pool({ filename: fixture('leftovers.mjs') });
    const token = registry.beginTurn('s');
    const f = flags3();
    const e = await rejection(p.run({ flags: f }, { name: 'throwsPrefixed', token }));
    expect(e.message).toBe('fullstop:need-slab:1,2');
    expect(Atomics.load(f, 1)).toBe(1);
    expect(p.stats()).toMatchObject({ completed: 1, running: 0, queued: 0 });
  });

  it('a Proxy payload whose second read throws is refused with state unchanged and no unhandled rejection', async () => {
    const p = pool();
    const token = registry.beginTurn('s');
    let reads = 0;
    const hostile = new Proxy({}, {
      get() {
        if (++reads > 1) throw new Error('second read');
        return undefined;
      },
    });
    await expect(p.run(hostile, { name: 'echo', token })).rejects.toThrow();
    expect(registry.stats()).toMatchObject({ liveOwners: 0 });
    registry.endTurn('s');
    expect(registry.stats()).toMatchObject({ liveOwners: 0, liveBridges: 0 });
    await expect(p.run({ value: 8 }, { name: 'echo' })).resolves.toMatchObject({ value: 8 });
  });

  it('graceMs over 2^31-1 ms is a RangeError (a Node timer would fire after 1 ms)', async () => {
    expect(() => new TurnPool({ filename: tasks, graceMs: 2 ** 31 })).toThrow(RangeError);
    const p = pool();
    await expect(p.run({}, { graceMs: 2 ** 31, token: registry.beginTurn('s') })).rejects.toThrow(RangeError);
  });
});

describe('a signal adds a cause: inside a turn the task is still the turn\'s', () => {
  it('a stop of the turn reaches a task run with its own signal', async () => {
    const p = pool();
    const turn = registry.beginTurn('s');
    const f = flags3();
    const run = runInTurn(turn, () => p.run({ flags: f, ms: 60_000 }, { name: 'sleeper', signal: AbortSignal.timeout(60_000) }));
    await started(f);
    turn.cancel();
    const e = await rejection(run);
    expect(isCancelledError(e)).toBe(true);
    expect(e.name).toBe('CancelledError'); // the turn's stop, not the signal's AbortError
    expect(e.hard).toBe(false);
  }, 10_000);
});

function flags3(): Int32Array {
  return new Int32Array(new SharedArrayBuffer(12));
}
