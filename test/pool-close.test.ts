import { afterEach, describe, expect, it } from 'vitest';
import { TurnPool, TurnRegistry, TurnRunner, CancelledError } from '../dist/src/index.js';
import { threadCount, eventually } from './support/leaks.js';
import { flags, started } from './support/handshake.js';
import { rejection } from './support/rejection.js';

const tasks = new URL('./fixtures/pool/tasks.mjs', import.meta.url).href;
/**
 * A liveness bound, not a figure: far below piscina's 30 s close timeout (what close() took when a
 * hard stop fell inside it), far above any stall of a loaded machine.
 */
const LIVENESS_MS = 10_000;
const GRACE_MS = 300;
const registry = new TurnRegistry();

afterEach(() => {
  registry.endTurn('s');
  expect(registry.stats()).toEqual({ liveTokens: 0, liveSlots: 0, liveBridges: 0, liveOwners: 0 });
});

/** A pool of one worker, its first task run so the worker exists before the counts are taken. */
async function warmPool(): Promise<TurnPool> {
  const pool = new TurnPool({ filename: tasks, minThreads: 1, maxThreads: 1, graceMs: GRACE_MS });
  await pool.run({ value: 0 }, { name: 'echo' });
  return pool;
}

/** A warm pool running `neverChecks` (a task that never looks at its token) in a turn of session 's'; resolves once it has started. */
async function stuckTask() {
  const pool = await warmPool();
  const token = registry.beginTurn('s');
  const f = flags();
  const run = pool.run({ flags: f }, { token, name: 'neverChecks' });
  await started(f);
  return { pool, token, run };
}

describe('TurnPool.close() while a cancelled task is in its grace', () => {
  for (const force of [false, true]) {
    it(`resolves right after the task's hard stop, not at piscina's close timeout${force ? ' (force)' : ''}`, async () => {
      const before = threadCount();
      const { pool, token, run } = await stuckTask();
      token.cancel();
      const t0 = performance.now();
      const closed = pool.close(force ? { force: true } : undefined);
      const e = await rejection(run);
      expect(e).toBeInstanceOf(CancelledError);
      expect(e.hard).toBe(true);
      await closed;
      const closeMs = performance.now() - t0;
      expect(closeMs).toBeGreaterThanOrEqual(GRACE_MS - 5); // it did wait for the grace
      expect(closeMs).toBeLessThan(LIVENESS_MS);
      expect(pool.threads).toHaveLength(0);
      expect(pool.stats()).toEqual({ completed: 1, cooperativeStops: 0, hardStops: 1, running: 0, queued: 0 });
      await eventually(() => threadCount() <= before, LIVENESS_MS, 'the worker thread to exit');
    });
  }

  it('refuses a task run after close() began, as piscina does, and still ends at the hard stop', async () => {
    const { pool, token, run } = await stuckTask();
    token.cancel();
    const closed = pool.close();
    const late = await rejection(pool.run({ value: 1 }, { name: 'echo' }));
    expect(late.name).toBe('AbortError');
    expect((await rejection(run)).hard).toBe(true);
    await closed;
    expect(pool.threads).toHaveLength(0);
  });

  for (const force of [false, true]) {
    it(`${force ? 'rejects' : 'runs'} a task queued behind it${force ? ' (force), which never starts' : ''}, then closes`, async () => {
      const { pool, token, run } = await stuckTask();
      const counter = new Int32Array(new SharedArrayBuffer(4));
      const queued = pool.run({ counter }, { name: 'counts' });
      expect(pool.stats().queued).toBe(1);
      token.cancel();
      const closed = pool.close({ force });
      expect((await rejection(run)).hard).toBe(true);
      if (force) expect((await rejection(queued)).name).toBe('AbortError');
      else expect(typeof await queued).toBe('number');
      await closed;
      expect(Atomics.load(counter, 0)).toBe(force ? 0 : 1);
      expect(pool.threads).toHaveLength(0);
      expect(pool.stats()).toMatchObject({ hardStops: 1, running: 0, queued: 0 });
    });
  }

  it('a second close() joins the first, and a forced one stops the queue of a close already waiting', async () => {
    const { pool, token, run } = await stuckTask();
    const counter = new Int32Array(new SharedArrayBuffer(4));
    const queued = pool.run({ counter }, { name: 'counts' });
    token.cancel();
    const first = pool.close();
    const second = pool.close({ force: true });
    expect((await rejection(run)).hard).toBe(true);
    expect((await rejection(queued)).name).toBe('AbortError');
    await Promise.all([first, second]);
    expect(Atomics.load(counter, 0)).toBe(0);
    expect(pool.threads).toHaveLength(0);
  });

  it("README's SIGTERM recipe: shutdown's deadline passes inside a task's grace, and close() resolves at its hard stop", async () => {
    const pool = await warmPool();
    const runner = new TurnRunner({ registry, pool, graceMs: GRACE_MS });
    const f = flags();
    const outcome = runner.run('s', (turn) => turn.tool('spin', {}, (token) => pool.run({ flags: f }, { token, name: 'neverChecks' })));
    await started(f);
    const t0 = performance.now();
    expect(await runner.shutdown({ deadlineMs: 20 })).toEqual([]); // the deadline passed first: no report finished yet
    await pool.close();
    const closeMs = performance.now() - t0;
    expect(closeMs).toBeGreaterThanOrEqual(GRACE_MS - 5);
    expect(closeMs).toBeLessThan(LIVENESS_MS);
    expect((await outcome).status).toBe('cancelled');
    expect(pool.threads).toHaveLength(0);
    expect(pool.stats()).toMatchObject({ hardStops: 1, running: 0, queued: 0 });
  });

  it('lets a running task that is not stopped finish, and resolves with it', async () => {
    const pool = await warmPool();
    const f = flags();
    const run = pool.run<{ slept: boolean }>({ flags: f, ms: 200 }, { name: 'sleeper' });
    await started(f);
    const closed = pool.close();
    expect((await run).slept).toBe(true);
    await closed;
    expect(pool.threads).toHaveLength(0);
    expect(pool.stats()).toEqual({ completed: 2, cooperativeStops: 0, hardStops: 0, running: 0, queued: 0 });
  });
});
