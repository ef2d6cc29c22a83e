import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { Worker } from 'node:worker_threads';
import { stat } from 'node:fs/promises';
import { TurnPool, TurnRegistry, isCancelledError, CancelledError } from '../dist/src/index.js';
import { governStop, ownersOf } from '../dist/src/token/owners.js';
import { threadCount, eventually } from './support/leaks.js';
import { flags, started } from './support/handshake.js';
import { rejection } from './support/rejection.js';
import { notifiesDuring } from './support/notify-spy.js';

const tasks = new URL('./fixtures/pool/tasks.mjs', import.meta.url).href;
/**
 * A liveness bound, not a figure: far below what a task that was not stopped would take (it sleeps
 * 60 s or loops for ever), far above any stall of a loaded machine. Figures are the bench's.
 */
const LIVENESS_MS = 10_000;
const registry = new TurnRegistry();
const pools: TurnPool[] = [];

function onePool(options: Record<string, unknown> = {}): TurnPool {
  const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 1, graceMs: 100, ...options });
  pools.push(pool);
  return pool;
}

afterEach(() => {
  for (const s of ['s', 'a', 'b']) registry.endTurn(s);
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.destroy()));
});

describe('a running task that is cancelled', () => {
  it('wakes from sleep(), rejects with a soft CancelledError, and its worker serves the next task', async () => {
    const pool = onePool();
    const first = await pool.run<{ threadId: number }>({ value: 0 }, { name: 'echo' });
    const token = registry.beginTurn('s');
    const f = flags();
    const p = pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' });
    await started(f);
    const t0 = performance.now();
    token.cancel();
    const e = await rejection(p);
    expect(performance.now() - t0).toBeLessThan(LIVENESS_MS);
    expect(e).toBeInstanceOf(CancelledError);
    expect(e.hard).toBe(false);
    expect(e.sessionId).toBe('s');
    const next = await pool.run<{ threadId: number }>({ value: 1 }, { name: 'echo' });
    expect(next.threadId).toBe(first.threadId);
    expect(pool.stats()).toEqual({ completed: 3, cooperativeStops: 1, hardStops: 0, running: 0, queued: 0 });
  });

  it('wakes from sleepUnlessCancelled() with false instead of a throw, and resolves with its own value', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const f = flags();
    const p = pool.run<{ slept: boolean; cancelledAfter: boolean }>({ flags: f, ms: 60_000 }, { token, name: 'sleepsUnlessCancelled' });
    await started(f);
    token.cancel();
    // A finished result is never replaced: the task wound down by itself and returned.
    expect(await p).toMatchObject({ slept: false, cancelledAfter: true });
    const short = await pool.run<{ slept: boolean }>({ ms: 1 }, { token: registry.beginTurn('a'), name: 'sleepsUnlessCancelled' });
    expect(short.slept).toBe(true);
    expect(pool.stats()).toMatchObject({ hardStops: 0, running: 0, queued: 0 });
  });

  it('that never checks is terminated after the grace window, rejects hard, and a new worker serves the next task', async () => {
    const pool = onePool({ graceMs: 150 });
    const first = await pool.run<{ threadId: number }>({ value: 0 }, { name: 'echo' });
    const token = registry.beginTurn('s');
    const f = flags();
    const p = pool.run({ flags: f }, { token, name: 'neverChecks' });
    await started(f);
    const t0 = performance.now();
    token.cancel();
    const e = await rejection(p);
    const waited = performance.now() - t0;
    expect(isCancelledError(e)).toBe(true);
    expect(e.hard).toBe(true);
    expect(waited).toBeGreaterThanOrEqual(145); // the grace is honoured, never cut short
    expect(waited).toBeLessThan(LIVENESS_MS);
    const next = await pool.run<{ threadId: number }>({ value: 1 }, { name: 'echo' });
    expect(next.threadId).not.toBe(first.threadId);
    expect(pool.stats()).toMatchObject({ hardStops: 1, running: 0 });
  });

  it('that catches the cancel and returns resolves with its value', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const f = flags();
    const p = pool.run({ flags: f }, { token, name: 'cleansUp' });
    await started(f);
    token.cancel();
    await expect(p).resolves.toMatchObject({ cleaned: true });
  });

  it('that is async sees the token across its awaits', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const f = flags();
    const p = pool.run({ flags: f }, { token, name: 'asyncChecks' });
    await started(f);
    token.cancel();
    const e = await rejection(p);
    expect(e.hard).toBe(false);
    expect(isCancelledError(e)).toBe(true);
  });

  it('is not hard-stopped on its own timer while a runner stop governs the grace', async () => {
    const pool = onePool({ graceMs: 20 });
    const other = onePool({ graceMs: 20 });
    const token = registry.beginTurn('s');
    const otherToken = registry.beginTurn('a');
    const f = flags();
    const g = flags();
    const p = pool.run({ flags: f }, { token, name: 'neverChecks' });
    const q = other.run({ flags: g }, { token: otherToken, name: 'neverChecks' });
    await Promise.all([started(f), started(g)]);
    governStop(token);
    token.cancel();
    otherToken.cancel();
    // The clock of the handshake: the same 20 ms grace, armed after the governed task's would have
    // been (timers of one duration fire in the order they were set), so once it has fired and
    // hard-stopped its own task, a timer of the governed task's would have fired too.
    expect((await rejection(q)).hard).toBe(true);
    const owners = ownersOf(token);
    expect(owners.map((o) => o.kind)).toEqual(['task']);
    expect((owners[0] as unknown as { hard: boolean }).hard).toBe(false);
    const before = Atomics.load(f, 1);
    await eventually(() => Atomics.load(f, 1) > before, LIVENESS_MS, 'the governed task to keep running');
    await owners[0]!.hardStop();
    const e = await rejection(p);
    expect(e.hard).toBe(true);
  });
});

describe('hostile task bodies end and leave the pool healthy', () => {
  // How each body ends: only `polls` listens; the others must be hard-stopped once the 100 ms grace is over.
  const hardByBody: Record<string, boolean> = { polls: false, neverChecks: true, swallows: true, blocksElsewhere: true, awaitsTimer: true };
  for (const [name, hard] of Object.entries(hardByBody)) {
    it(`${name}: ends ${hard ? 'hard, once the 100 ms grace is over' : 'cooperatively, within the grace'}, and the next task runs`, async () => {
      const pool = onePool({ graceMs: 100 });
      const token = registry.beginTurn('s');
      const f = flags();
      const p = pool.run({ flags: f }, { token, name });
      await started(f);
      const t0 = performance.now();
      token.cancel();
      const e = await rejection(p);
      const elapsed = performance.now() - t0;
      expect(isCancelledError(e)).toBe(true);
      expect(e.hard).toBe(hard);
      expect(pool.stats()).toMatchObject({ hardStops: hard ? 1 : 0, cooperativeStops: hard ? 0 : 1, running: 0 });
      // The grace is honoured (never cut short), and the stop does come. A cooperative end is
      // within the grace by construction (else it would be hard).
      if (hard) expect(elapsed).toBeGreaterThanOrEqual(99);
      expect(elapsed).toBeLessThan(LIVENESS_MS);
      await expect(pool.run({ value: 7 }, { name: 'echo' })).resolves.toMatchObject({ value: 7 });
    });
  }
});

describe('a queued task', () => {
  it('is dropped on cancel at once and never runs', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const f = flags();
    const counter = new Int32Array(new SharedArrayBuffer(4));
    const running = pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' });
    await started(f);
    const queued = pool.run({ counter }, { token, name: 'counts' });
    expect(pool.stats().queued).toBe(1);
    token.cancel();
    const e = await rejection(queued);
    expect(isCancelledError(e)).toBe(true);
    expect(e.hard).toBe(false);
    await rejection(running);
    await pool.run({ value: 1 }, { name: 'echo' });
    expect(Atomics.load(counter, 0)).toBe(0);
  });

  it('of an already cancelled token never starts', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    token.cancel();
    const counter = new Int32Array(new SharedArrayBuffer(4));
    const e = await rejection(pool.run({ counter }, { token, name: 'counts' }));
    expect(isCancelledError(e)).toBe(true);
    await pool.run({ value: 1 }, { name: 'echo' });
    expect(Atomics.load(counter, 0)).toBe(0);
  });
});

describe('outcomes that are not stops', () => {
  it('an error thrown for another reason rejects unchanged', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const e = await rejection(pool.run({}, { token, name: 'throwsPlain' }));
    expect(e.name).toBe('TypeError');
    expect(e.message).toBe('plain failure');
    expect(isCancelledError(e)).toBe(false);
  });

  it('a task without a token runs as on piscina', async () => {
    const pool = onePool();
    await expect(pool.run({ value: 'x' }, { name: 'echo' })).resolves.toMatchObject({ value: 'x' });
  });
});

describe('a plain AbortSignal', () => {
  it('gets the cooperative stop', async () => {
    const pool = onePool();
    const controller = new AbortController();
    const f = flags();
    const p = pool.run({ flags: f, ms: 60_000 }, { signal: controller.signal, name: 'sleeper' });
    await started(f);
    controller.abort();
    const e = await rejection(p);
    expect(isCancelledError(e)).toBe(true);
    expect(e.hard).toBe(false);
  });

  it('that is already aborted starts nothing', async () => {
    const pool = onePool();
    const counter = new Int32Array(new SharedArrayBuffer(4));
    const e = await rejection(pool.run({ counter }, { signal: AbortSignal.abort(), name: 'counts' }));
    expect(isCancelledError(e)).toBe(true);
    expect(Atomics.load(counter, 0)).toBe(0);
  });

  it('next to a token stops only its own task, not the turn', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const controller = new AbortController();
    const f = flags();
    const p = pool.run({ flags: f, ms: 60_000 }, { token, signal: controller.signal, name: 'sleeper' });
    await started(f);
    controller.abort();
    await rejection(p);
    expect(token.isCancelled()).toBe(false);
  });
});

describe('the wakes of a cancel', () => {
  it("notify a child task's slot, and not its turn's root, which a task can only cancel", async () => {
    // The pool hands a child's task its root's slot for `cancelTurn()` alone: nobody can sleep
    // on it, so a stop that wakes it would pay a notify for nothing.
    const pool = onePool();
    const token = registry.beginTurn('s');
    const child = token.child();
    const f = flags();
    const p = pool.run({ flags: f, ms: 60_000 }, { token: child, name: 'sleeper' });
    await started(f);
    const notified = notifiesDuring(() => token.cancel());
    expect(isCancelledError(await rejection(p))).toBe(true);
    // The handles are read only now: reading `handle` is itself an export that could be slept on.
    // A notify counts as one of a slot only when both its buffer and its index are the slot's.
    const of = ({ buffer, index }: { buffer: SharedArrayBuffer; index: number }) => notified.some((n) => n.buffer === buffer && n.index === index);
    expect(of(child.handle)).toBe(true);
    expect(of(token.handle)).toBe(false);
  });
});

describe('cancelTurn() in a worker', () => {
  it('aborts the main-thread signal of the turn, also from a child token', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const child = token.child();
    const aborted = new Promise((resolve) => token.signal.addEventListener('abort', resolve, { once: true }));
    const result = await pool.run<{ tripped: boolean; now: boolean }>({}, { token: child, name: 'trips' });
    expect(result).toEqual({ tripped: true, now: true });
    await aborted;
    expect(token.isCancelled()).toBe(true);
    expect(child.isCancelled()).toBe(true);
  });
});

/**
 * Resolves once a worker is blocked in a paused checkpoint: it waits on its slab's control cell
 * (cell 0), so a notify of that cell wakes one waiter. That wake is spurious for the worker: still
 * paused, it waits again without making progress.
 */
async function blockedInCheckpoint(token: { handle: { buffer: SharedArrayBuffer } }): Promise<void> {
  const cells = new Int32Array(token.handle.buffer);
  await eventually(() => Atomics.notify(cells, 0, 1) === 1, 5000, 'the task to block in checkpoint()');
}

describe('pause and resume', () => {
  it('checkpoint() blocks while paused and moves again after resume', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const f = flags();
    const p = pool.run({ flags: f }, { token, name: 'phases' });
    await started(f);
    await eventually(() => Atomics.load(f, 1) > 10, 2000, 'progress');
    registry.pause();
    try {
      await blockedInCheckpoint(token);
      const c1 = Atomics.load(f, 1);
      // Woken by that notify, the task found the registry still paused and blocked again, with no
      // step in between (a second notify finds it waiting).
      await blockedInCheckpoint(token);
      expect(Atomics.load(f, 1)).toBe(c1);
      registry.resume();
      await eventually(() => Atomics.load(f, 1) > c1, 2000, 'progress after resume');
    } finally {
      registry.resume();
    }
    token.cancel();
    await rejection(p);
  });

  it('a stop wakes a paused task without resuming anyone else', async () => {
    const pool = onePool();
    const token = registry.beginTurn('s');
    const f = flags();
    const p = pool.run({ flags: f }, { token, name: 'phases' });
    await started(f);
    registry.pause();
    try {
      await blockedInCheckpoint(token);
      token.cancel();
      const e = await rejection(p);
      expect(isCancelledError(e)).toBe(true);
      expect(e.hard).toBe(false);
      expect(registry.paused).toBe(true);
    } finally {
      registry.resume();
    }
  });
});

describe('slabs', () => {
  it('a token in a slab added later reaches the worker (sent once, then numbers only)', async () => {
    const small = new TurnRegistry({ slots: 1 });
    const pool = onePool();
    const tokens = ['a', 'b', 'c'].map((s) => small.beginTurn(s));
    for (const token of tokens) {
      const f = flags();
      const p = pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' });
      await started(f);
      token.cancel();
      expect((await rejection(p)).hard).toBe(false);
    }
    for (const s of ['a', 'b', 'c']) small.endTurn(s);
    expect(small.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
  });
});

describe('piscina options keep their meaning', () => {
  it('maxQueue limits tasks with a token as it limits plain ones', async () => {
    const pool = onePool({ maxQueue: 2 });
    const token = registry.beginTurn('s');
    const f = flags();
    const runs = [pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' })];
    await started(f);
    for (let i = 0; i < 5; i++) runs.push(pool.run({ value: i }, { token, name: 'echo' }));
    const settled = Promise.allSettled(runs);
    // Piscina refuses the overflow synchronously; its rejection reaches us a microtask later.
    await new Promise((r) => setImmediate(r));
    token.cancel();
    const results = await settled;
    const overflow = results.filter((r) => r.status === 'rejected' && /queue/i.test(String((r as PromiseRejectedResult).reason?.message)) && !isCancelledError((r as PromiseRejectedResult).reason));
    expect(overflow).toHaveLength(3);
  });

  it('with several tasks per worker, a hard stop takes only the stopped task\'s worker', async () => {
    const pool = onePool({ maxThreads: 2, minThreads: 2, concurrentTasksPerWorker: 2, graceMs: 50 });
    const token = registry.beginTurn('s');
    const other = registry.beginTurn('a');
    const f = flags();
    const g = flags();
    const stubborn = pool.run({ flags: f }, { token, name: 'neverChecks' });
    const bystander = pool.run({ flags: g, ms: 300 }, { token: other, name: 'sleeper' });
    await started(f);
    await started(g);
    token.cancel();
    expect((await rejection(stubborn)).hard).toBe(true);
    await expect(bystander).resolves.toMatchObject({ slept: true });
  });
});

describe('lifecycle', () => {
  it('20 stop cycles and destroy() leave the thread count where it started and the registry at zero', async () => {
    // Measure against a quiet process: the other tests' pools gone, libuv's thread pool started.
    await Promise.all(pools.splice(0).map((p) => p.destroy()));
    await stat('.');
    const before = threadCount();
    const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 2, graceMs: 50 });
    for (let i = 0; i < 20; i++) {
      const token = registry.beginTurn('s');
      const f = flags();
      const name = i % 4 === 3 ? 'neverChecks' : 'sleeper';
      const p = pool.run({ flags: f, ms: 60_000 }, { token, name });
      await started(f);
      token.cancel();
      await rejection(p);
      registry.endTurn('s', token);
    }
    expect(pool.stats()).toMatchObject({ cooperativeStops: 15, hardStops: 5, running: 0, queued: 0 });
    await pool.destroy();
    await eventually(() => threadCount() <= before, 10_000, 'threads to exit');
  }, 60_000);
});

describe('bad input', () => {
  it('refuses a negative, NaN or too long graceMs with a RangeError: the constructor throws, run() rejects', async () => {
    expect(() => new TurnPool({ filename: tasks, graceMs: -1 })).toThrow(RangeError);
    expect(() => new TurnPool({ filename: tasks, graceMs: Number.NaN })).toThrow(/graceMs/);
    expect(() => new TurnPool({ filename: tasks, graceMs: 2 ** 31 })).toThrow(/graceMs.*2147483647/);
    const pool = onePool();
    await expect(pool.run({}, { graceMs: -5 })).rejects.toThrow(RangeError);
    await expect(pool.run({}, { graceMs: 2 ** 31 })).rejects.toThrow(/options\.graceMs.*2147483647/);
    expect(pool.stats()).toMatchObject({ completed: 0, running: 0, queued: 0 });
  });

  it('rejects (never throws) a token that is not a CancelToken and other bad options, and starts nothing', async () => {
    const pool = onePool();
    const calls = [
      () => pool.run({}, { token: { signal: new AbortController().signal } as never }),
      () => pool.run({}, { signal: {} as never }),
      () => pool.run({}, { filename: 42 as never }),
      () => pool.run({}, { filename: '' }),
      () => pool.run({}, 7 as never),
    ];
    const errors = await Promise.all(calls.map((call) => rejection(call())));
    expect(errors.map((e) => e.message)).toEqual([
      expect.stringMatching(/options\.token: expected a CancelToken/),
      expect.stringMatching(/options\.signal: expected an AbortSignal or an EventEmitter/),
      'filename argument must be a string',
      expect.stringMatching(/options\.filename: expected a path/),
      'options must be an object',
    ]);
    const nameless = new TurnPool({ minThreads: 0, maxThreads: 1 });
    pools.push(nameless);
    await expect(nameless.run({})).rejects.toThrow('filename must be provided to run() or in options object');
    expect(pool.stats()).toMatchObject({ completed: 0, running: 0, queued: 0 });
    expect(registry.stats().liveOwners).toBe(0);
  });

  it('fullstop/worker functions outside a pool task throw a clear error', async () => {
    const runtime = new URL('../dist/workers/runtime.js', import.meta.url).href;
    const worker = new Worker(
      `import(${JSON.stringify(runtime)}).then((m) => { try { m.checkCancelled() } catch (e) { require('node:worker_threads').parentPort.postMessage(e.message) } })`,
      { eval: true },
    );
    const message = await new Promise((resolve) => worker.once('message', resolve));
    await worker.terminate();
    expect(message).toMatch(/outside a TurnPool task.*tokenFromHandle/);
  });
});
