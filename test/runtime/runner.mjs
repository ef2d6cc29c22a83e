// The runner's stop order on this runtime, with a file ledger: the `cancelling` intent is on disk
// before the turn's signal fires; the history (every cut call's tool_aborted, the turn_aborted
// marker, `cancelled`) is on disk before `turn_aborted` is emitted; a pool task and an exec tree in
// the turn are both stopped (hard-stopped when they do not listen), and nothing is left.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exec, Ledger, TurnPool, TurnRegistry, TurnRunner } from '../../dist/src/index.js';
import { assert, check, done, fixture, isGone, noLeaks, taskStarted, treeOfFive } from './harness.mjs';

const registry = new TurnRegistry();
const pool = new TurnPool({ filename: fixture('pool/tasks.mjs'), minThreads: 1, maxThreads: 2, graceMs: 50 });
const dir = mkdtempSync(join(tmpdir(), 'fullstop-runtime-runner-'));
const path = join(dir, 'history.jsonl');
const ledger = await Ledger.open(path);
const runner = new TurnRunner({ registry, ledger, graceMs: 300 });

/** The ledger's lines as the file system has them, each as `type` or `status:<status>`. */
const onDisk = () => readFileSync(path, 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line))
  .map((e) => (e.type === 'status' ? `status:${e.status}` : e.type));

/** A turn running a pool task and an exec tree at once; stopped once both have started. */
async function stopWith(session, task, script) {
  const flags = new Int32Array(new SharedArrayBuffer(8));
  const pidfile = join(dir, `${session}-tree`);
  const seen = {};
  const outcome = runner.run(session, async (turn) => {
    turn.signal.addEventListener('abort', () => { seen.atSignal = onDisk(); }, { once: true });
    await Promise.all([
      turn.tool('task', { task }, (token) => pool.run({ flags, ms: 60_000 }, { token, name: task })),
      turn.tool('tree', { script }, (token) => exec('sh', [fixture(`exec/${script}`), pidfile], { token })),
    ]);
  }, { turnId: `${session}-t1` });
  runner.once('turn_aborted', () => { seen.atEvent = onDisk(); });
  await taskStarted(flags);
  const pids = await treeOfFive(pidfile);
  const before = onDisk();
  const report = await runner.stop(session);
  const result = await outcome;
  assert.ok(pids.every(isGone), `alive after the stop: ${pids.filter((p) => !isGone(p))}`);
  assert.equal(result.status, 'cancelled');
  return { before, seen, report };
}

check('runner: cancelling is on disk before the signal; the whole history before turn_aborted (cooperative)', async () => {
  const { before, seen, report } = await stopWith('s1', 'sleepsUnlessCancelled', 'tree-of-five.sh');
  assert.deepEqual(seen.atSignal, [...before, 'status:cancelling']);
  const history = seen.atEvent.slice(seen.atSignal.length);
  assert.deepEqual(history.sort(), ['status:cancelled', 'tool_aborted', 'tool_aborted', 'turn_aborted']);
  assert.equal(seen.atEvent.at(-1), 'status:cancelled');
  assert.equal(report.settledCooperatively, true);
  assert.deepEqual(report.hardStopped, { workers: 0, processGroups: 0, questions: 0 });
});

check('runner: a task that never checks and a tree that ignores SIGTERM are hard-stopped after the grace, same order', async () => {
  const { before, seen, report } = await stopWith('s2', 'neverChecks', 'ignores-term.sh');
  assert.deepEqual(seen.atSignal, [...before, 'status:cancelling']);
  assert.deepEqual(seen.atEvent.slice(seen.atSignal.length).sort(), ['status:cancelled', 'tool_aborted', 'tool_aborted', 'turn_aborted']);
  assert.equal(report.settledCooperatively, false);
  assert.deepEqual(report.hardStopped, { workers: 1, processGroups: 1, questions: 0 });
});

check('runner: no leaks (stats zero, no child, pool idle)', async () => {
  assert.deepEqual([pool.stats().running, pool.stats().queued], [0, 0]);
  await pool.close();
  await ledger.close();
  await noLeaks(registry);
  rmSync(dir, { recursive: true, force: true });
});

await done('runner');
