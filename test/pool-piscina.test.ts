import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { EventEmitter } from 'node:events';
import { Piscina } from 'piscina';
import * as fullstop from '../dist/src/index.js';
import { TurnPool, TurnRegistry, isCancelledError, CancelledError } from '../dist/src/index.js';
import { governStop, ownersOf } from '../dist/src/token/owners.js';
import { flags, started } from './support/handshake.js';
import { eventually } from './support/leaks.js';
import { rejection } from './support/rejection.js';

const fixture = (name: string) => new URL(`./fixtures/pool/${name}`, import.meta.url).href;
const tasks = fixture('tasks.mjs');
const shares = fixture('shares.mjs');
const registry = new TurnRegistry();
const pools: TurnPool[] = [];

function pool(options: Record<string, unknown> = {}): TurnPool {
  const p = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 1, ...options });
  pools.push(p);
  return p;
}

/** Resolves once `flags[0]` has reached `n` (never by sleeping). */
async function startedCount(f: Int32Array, n: number): Promise<void> {
  const deadline = performance.now() + 5000;
  for (let seen = Atomics.load(f, 0); seen < n; seen = Atomics.load(f, 0)) {
    if (performance.now() > deadline) throw new Error(`only ${seen} of ${n} tasks started within 5 s`);
    const r = Atomics.waitAsync(f, 0, seen, 5000);
    if (r.async) await r.value;
  }
}

afterEach(() => {
  for (const s of ['s', 'a', 'b']) registry.endTurn(s);
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

afterAll(async () => {
  await Promise.all(pools.map((p) => p.destroy()));
});

describe('TurnPool is a Piscina', () => {
  it('is an EventEmitter and a Piscina, with piscina\'s statics (its named exports), which fullstop does not re-export', () => {
    const p = pool();
    expect(p).toBeInstanceOf(Piscina);
    expect(p).toBeInstanceOf(EventEmitter);
    expect(TurnPool.isWorkerThread).toBe(false);
    expect(TurnPool.version).toBe(Piscina.version);
    expect(TurnPool.move).toBe(Piscina.move);
    const names = ['move', 'isWorkerThread', 'workerData', 'transferableSymbol', 'valueSymbol', 'queueOptionsSymbol', 'FixedQueue', 'ArrayTaskQueue'] as const;
    for (const name of names) expect(Object.keys(fullstop), name).not.toContain(name);
    expect(names.map((name) => TurnPool[name]))
      .toEqual([Piscina.move, false, undefined, Piscina.transferableSymbol, Piscina.valueSymbol, Piscina.queueOptionsSymbol, Piscina.FixedQueue, Piscina.ArrayTaskQueue]);
  });

  it('emits workerCreate, message, needsDrain and drain, and keeps piscina\'s getters', async () => {
    const p = pool({ minThreads: 0, maxThreads: 1 });
    const seen: string[] = [];
    const created = new Promise((resolve) => p.once('workerCreate', resolve));
    p.on('needsDrain', () => seen.push('needsDrain'));
    p.on('drain', () => seen.push('drain'));
    const token = registry.beginTurn('s');
    const results = await Promise.all([
      p.run({ value: 1 }, { name: 'echo', token }),
      p.run({ value: 2 }, { name: 'echo' }),
    ]);
    await created;
    expect(results.map((r: any) => r.value)).toEqual([1, 2]);
    const message = new Promise((resolve) => p.once('message', resolve));
    await p.run(null, { filename: shares, name: 'says', token });
    expect(await message).toBe('hello from the worker');
    await new Promise((resolve) => setImmediate(resolve));
    expect(seen[0]).toBe('needsDrain');
    expect(seen.at(-1)).toBe('drain');
    expect(p.completed).toBe(3);
    expect(p.threads).toHaveLength(1);
    expect(p.queueSize).toBe(0);
    expect(p.maxThreads).toBe(1);
    expect(p.minThreads).toBe(0);
    expect(p.needsDrain).toBe(false);
    expect(p.histogram.runTime.max).toBeGreaterThanOrEqual(0);
    expect(p.histogram.waitTime.max).toBeGreaterThanOrEqual(0);
    expect(p.utilization).toBeGreaterThan(0);
    expect(p.duration).toBeGreaterThan(0);
    // `options` shows what was given, not the pool's wrappers.
    expect(p.options.filename).toBe(new URL(tasks).pathname);
    expect(p.options.name).toBe('default');
    expect(p.options.loadBalancer).toBeUndefined();
    expect(p.options.graceMs).toBe(100);
  });

  it('reads options as piscina does: own properties only, env/execArgv/loadBalancer passed through', async () => {
    const inherited = new TurnPool(Object.create({ filename: tasks }));
    pools.push(inherited);
    await expect(inherited.run({})).rejects.toThrow('filename must be provided to run() or in options object');
    let balanced = 0;
    const loadBalancer = (_task: unknown, workers: any[]) => { balanced++; return workers.find((w) => w.currentUsage === 0) ?? null; };
    const p = pool({ filename: fixture('env.cjs'), env: { FULLSTOP_POOL_TEST: 'passed' }, execArgv: ['--no-deprecation'], loadBalancer });
    const token = registry.beginTurn('s');
    const result: any = await p.run(null, { token });
    expect(result).toEqual({ env: 'passed', execArgv: ['--no-deprecation'] });
    expect(balanced).toBeGreaterThan(0);
    expect(p.options.loadBalancer).toBe(loadBalancer);
    expect(p.options.env).toEqual({ FULLSTOP_POOL_TEST: 'passed' });
  });

  it('move() and transferList work for a task with a token as for a plain one (the buffer is transferred, not copied)', async () => {
    const p = pool({ filename: fixture('uncloneable.mjs') });
    const token = registry.beginTurn('s');
    const listed = new Uint8Array([4, 5]);
    const back: any = await p.run({ listed }, { name: 'fine', token, transferList: [listed.buffer] });
    expect(listed.byteLength).toBe(0);
    expect([...back.listed]).toEqual([4, 5]);
    const whole = new Uint8Array([6]);
    expect([...(await p.run(TurnPool.move(whole), { name: 'fine', token }) as Uint8Array)]).toEqual([6]);
    expect(whole.byteLength).toBe(0);
  });

  it('await using closes gracefully: a running task finishes with its value; Symbol.dispose closes too', async () => {
    let result: Promise<unknown>;
    const f = flags();
    {
      await using p = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 1 });
      result = p.run({ flags: f, ms: 200 }, { name: 'sleeper' });
      await started(f);
    }
    await expect(result).resolves.toMatchObject({ slept: true });
    const p = pool();
    const closed = new Promise((resolve) => p.once('close', resolve));
    p[Symbol.dispose]();
    await closed;
  });
});

describe('abort through a plain signal, as piscina callers write it', () => {
  it('an EventEmitter signal stops a task that listens: AbortError, cause = undefined reason, a CancelledError that is not hard', async () => {
    const p = pool();
    const ee = new EventEmitter();
    const f = flags();
    const run = p.run({ flags: f }, { name: 'polls', signal: ee as never });
    await started(f);
    ee.emit('abort');
    const e = await rejection(run);
    expect(e.name).toBe('AbortError');
    expect(e.message).toBe('The task has been aborted');
    expect(e).toBeInstanceOf(CancelledError);
    expect(isCancelledError(e)).toBe(true);
    expect(e.hard).toBe(false);
    expect(ee.listenerCount('abort')).toBe(0);
    expect(p.stats()).toMatchObject({ cooperativeStops: 1, hardStops: 0 });
  });

  it('an AbortController stops a task that never checks after the grace: cause is the reason, hard is true', async () => {
    const p = pool({ graceMs: 50 });
    const controller = new AbortController();
    const reason = new Error('user pressed stop');
    const f = flags();
    const run = p.run({ flags: f }, { name: 'neverChecks', signal: controller.signal });
    await started(f);
    controller.abort(reason);
    const e = await rejection(run);
    expect([e.name, e.message, e.cause, e.hard, isCancelledError(e)]).toEqual(['AbortError', 'The task has been aborted', reason, true, true]);
    expect(p.stats()).toMatchObject({ hardStops: 1 });
    await expect(p.run({ value: 3 }, { name: 'echo' })).resolves.toMatchObject({ value: 3 });
  });

  it('graceMs: 0 terminates at once, as piscina does', async () => {
    const p = pool({ graceMs: 0 });
    const controller = new AbortController();
    const f = flags();
    const run = p.run({ flags: f }, { name: 'polls', signal: controller.signal });
    await started(f);
    let settled = false;
    run.catch(() => {}).finally(() => { settled = true; });
    controller.abort();
    const e = await rejection(run);
    expect(settled).toBe(true);
    expect(e.hard).toBe(true);
    expect(e.name).toBe('AbortError');
  });

  it('an already aborted signal starts nothing and rejects with its reason as cause', async () => {
    const p = pool();
    const reason = new Error('too late');
    const e = await rejection(p.run({ value: 1 }, { name: 'echo', signal: AbortSignal.abort(reason) }));
    expect([e.name, e.cause, e.hard]).toEqual(['AbortError', reason, false]);
    expect(p.completed).toBe(0);
  });
});

describe('concurrentTasksPerWorker > 1', () => {
  it('tasks with a token share a worker as plain tasks do (none owns a whole worker)', async () => {
    const p = pool({ filename: shares, concurrentTasksPerWorker: 4 });
    const token = registry.beginTurn('s');
    const f = flags();
    const runs = [0, 1, 2, 3].map(() => p.run({ flags: f }, { name: 'waitsForRelease', token }));
    await startedCount(f, 4);
    expect(p.queueSize).toBe(0);
    expect(p.stats()).toMatchObject({ running: 4, queued: 0 });
    Atomics.store(f, 1, 1);
    Atomics.notify(f, 1);
    const threads = await Promise.all(runs);
    expect(new Set(threads).size).toBe(1);
  });

  it('a task that ignores its stop is abandoned hard at the grace; its neighbours finish, then its worker ends', async () => {
    const p = pool({ filename: shares, concurrentTasksPerWorker: 4, graceMs: 50 });
    const stopped = registry.beginTurn('a');
    const other = registry.beginTurn('b');
    const f = flags();
    const runaway = p.run({ flags: f }, { name: 'ignoresStop', token: stopped });
    const neighbours = [p.run({ flags: f }, { name: 'waitsForRelease', token: other }), p.run({ flags: f }, { name: 'waitsForRelease' })];
    await startedCount(f, 3);
    const worker = p.threads[0]!;
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    stopped.cancel();
    const e = await rejection(runaway);
    expect(e.hard).toBe(true);
    expect(p.stats()).toMatchObject({ hardStops: 1 });
    // Condemned, not killed: the neighbours are still running on it, and no new task joins them.
    const next = p.run(null, { name: 'where' });
    Atomics.store(f, 1, 1);
    Atomics.notify(f, 1);
    const [a, b] = await Promise.all(neighbours);
    expect(a).toBe(worker.threadId);
    expect(b).toBe(worker.threadId);
    await exited;
    expect(await next).not.toBe(worker.threadId);
  });

  it('an abandoned task whose code then ends by itself gives its worker back: its neighbour finishes there and the worker lives on', async () => {
    const p = pool({ filename: shares, concurrentTasksPerWorker: 4, maxThreads: 2, graceMs: 10_000 });
    const stopped = registry.beginTurn('a');
    const f = flags();
    const own = new Int32Array(new SharedArrayBuffer(4));
    const runaway = p.run({ flags: f, own }, { name: 'ignoresStopUntilReleased', token: stopped });
    const neighbour = p.run({ flags: f }, { name: 'waitsForRelease' });
    await startedCount(f, 2);
    expect(p.threads).toHaveLength(1);
    const worker = p.threads[0]!;
    // The hard stop at once (a runner stop's end of grace): the pool's own 10 s timer stays out of it.
    governStop(stopped);
    stopped.cancel();
    await ownersOf(stopped)[0]!.hardStop();
    expect((await rejection(runaway)).hard).toBe(true);
    Atomics.store(own, 0, 1);
    Atomics.notify(own, 0);
    await eventually(() => p.stats().running === 1, 5000, "the abandoned task's code to end");
    // Any settle reaps condemned workers: this one would end the first worker if it were still
    // counted as running an abandoned task besides its neighbour.
    await p.run(null, { name: 'where' });
    Atomics.store(f, 1, 1);
    Atomics.notify(f, 1);
    expect(await neighbour).toBe(worker.threadId);
    expect(p.threads.map((t) => t.threadId)).toContain(worker.threadId);
    expect(p.stats()).toMatchObject({ hardStops: 1, running: 0 });
  });

  it('a task that blocks its shared worker past the grace: its neighbours get one more grace window, then the worker ends and they reject', async () => {
    const p = pool({ filename: shares, concurrentTasksPerWorker: 2, graceMs: 50 });
    const stopped = registry.beginTurn('a');
    const f = flags();
    const g = flags();
    const neighbour = p.run({ flags: g }, { name: 'waitsForRelease' });
    await startedCount(g, 1);
    const blocker = p.run({ flags: f }, { filename: tasks, name: 'neverChecks', token: stopped });
    await started(f);
    stopped.cancel();
    expect((await rejection(blocker)).hard).toBe(true);
    const e = await rejection(neighbour);
    expect(e.message).toMatch(/worker exited/);
    await expect(p.run(null, { name: 'where' })).resolves.toEqual(expect.any(Number));
  });
});
