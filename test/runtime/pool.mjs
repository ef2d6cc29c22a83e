// The pool's promises on this runtime: a cooperative stop rejects with a CancelledError and keeps
// the worker; a task that never checks (or blocks elsewhere) is hard-stopped after its grace on a
// worker that is replaced; a sleep wakes on the cancel; nothing is left after.
import { CancelledError, isCancelledError, TurnPool, TurnRegistry } from '../../dist/src/index.js';
import { assert, check, done, fixture, noLeaks, taskStarted } from './harness.mjs';

const registry = new TurnRegistry();
const pool = new TurnPool({ filename: fixture('pool/tasks.mjs'), minThreads: 1, maxThreads: 1, graceMs: 100 });

/** Start `name` under a fresh turn, wait until it runs, cancel the turn; the task's rejection and timing. */
async function stopTask(name, task = {}) {
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const token = registry.beginTurn(`s-${name}`);
  try {
    const running = pool.run({ flags, ...task }, { token, name });
    await taskStarted(flags);
    const at = performance.now();
    token.cancel('cancel.user');
    const error = await running.then(() => undefined, (e) => e);
    return { error, ms: performance.now() - at };
  } finally {
    registry.endTurn(`s-${name}`, token);
  }
}

function assertCancelled(error, hard) {
  assert.ok(error instanceof CancelledError, `expected a CancelledError, got ${error?.stack ?? error}`);
  assert.ok(isCancelledError(error));
  assert.equal(error.code, 'ERR_FULLSTOP_CANCELLED');
  assert.equal(error.hard, hard);
}

check('pool: a cooperative stop rejects with CancelledError, the worker is kept', async () => {
  const before = await pool.run({ value: 0 }, { name: 'echo' });
  const { error } = await stopTask('polls');
  assertCancelled(error, false);
  const after = await pool.run({ value: 1 }, { name: 'echo' });
  assert.equal(after.threadId, before.threadId);
});

check('pool: a sleep (Atomics.wait) wakes on the cancel, long before its 60 s', async () => {
  const { error, ms } = await stopTask('sleeper', { ms: 60_000 });
  assertCancelled(error, false);
  assert.ok(ms < 5000, `woke after ${ms} ms`);
});

check('pool: a task that never checks is hard-stopped after its grace, its worker replaced', async () => {
  const before = await pool.run({ value: 0 }, { name: 'echo' });
  const { error } = await stopTask('neverChecks');
  assertCancelled(error, true);
  const after = await pool.run({ value: 1 }, { name: 'echo' });
  assert.notEqual(after.threadId, before.threadId);
});

check('pool: a task blocked in Atomics.wait on another buffer is hard-stopped', async () => {
  const { error } = await stopTask('blocksElsewhere');
  assertCancelled(error, true);
});

check("pool: a worker's cancelTurn() aborts the turn's signal on the main thread (the Atomics.waitAsync bridge)", async () => {
  const token = registry.beginTurn('s-trips');
  try {
    const aborted = new Promise((resolve) => token.signal.addEventListener('abort', resolve, { once: true }));
    const result = await pool.run({ flags: new Int32Array(new SharedArrayBuffer(8)) }, { token, name: 'trips' });
    assert.deepEqual(result, { tripped: true, now: true });
    await aborted;
    assert.equal(token.isCancelled(), true);
  } finally {
    registry.endTurn('s-trips', token);
  }
});

check('pool: no leaks (stats zero, no task running or queued after close)', async () => {
  const stats = pool.stats();
  assert.equal(stats.running, 0);
  assert.equal(stats.queued, 0);
  assert.ok(stats.cooperativeStops >= 2 && stats.hardStops >= 2, JSON.stringify(stats));
  await pool.close();
  await noLeaks(registry);
});

await done('pool');
