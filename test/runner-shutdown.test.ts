/**
 * `runner.shutdown()`: a deploy stops every running turn cleanly and starts none.
 */
import { describe, expect, it } from 'vitest';
import { ErrorCodes, ShuttingDownError, TurnRunner, type LedgerEntry } from '../dist/src/index.js';
import { flags, started } from './support/handshake.js';
import { runnerScene } from './support/runner-scene.js';
import { runnerHooks } from '../dist/src/turn/runner-hooks.js';

const scene = runnerScene('fullstop-shutdown-', { tasks: new URL('./fixtures/pool/tasks.mjs', import.meta.url) });
const { registry, pool } = scene;

function onDisk(turnId: string): LedgerEntry[] {
  return scene.onDisk().filter((e) => e.turnId === turnId);
}

/** A turn whose tool runs a pool task that sleeps on its slot until stopped; resolves once the task runs. */
async function sleepingTurn(sessionId: string, turnId: string) {
  const f = flags();
  const outcome = scene.runner.run(sessionId, (turn) => turn.tool('sleep', {}, (token) => pool.run({ flags: f, ms: 60_000 }, { token, name: 'sleeper' })), { turnId });
  await started(f);
  return { outcome }; // wrapped: an async function returning the promise itself would wait for the turn's end
}

describe('shutdown', () => {
  it('stops every running turn with cancel.shutdown, resolves with their reports once each emitted turn_aborted, and refuses run from the call on', async () => {
    const { outcome: a } = await sleepingTurn('a', 'ta');
    const { outcome: b } = await sleepingTurn('b', 'tb');
    const emitted: string[] = [];
    scene.runner.on('turn_aborted', (p) => emitted.push(p.turnId));
    const shutdown = scene.runner.shutdown();
    expect(scene.runner.shutdown()).toBe(shutdown); // a second call: the same promise
    await expect(scene.runner.run('c', async () => 1)).rejects.toBeInstanceOf(ShuttingDownError);
    await expect(scene.runner.run('c', async () => 1)).rejects.toMatchObject({ code: ErrorCodes.shuttingDown });
    const reports = await shutdown;
    expect(reports.map((r) => r.turnId).sort()).toEqual(['ta', 'tb']);
    expect(reports.every((r) => r.reason === 'cancel.shutdown' && r.settledCooperatively)).toBe(true);
    expect(emitted.sort()).toEqual(['ta', 'tb']);
    expect((await a).status).toBe('cancelled');
    expect((await b).status).toBe('cancelled');
    expect(onDisk('ta').at(-1)).toMatchObject({ type: 'status', status: 'cancelled', reason: 'cancel.shutdown' });
    expect(onDisk('c')).toEqual([]); // the refused run started nothing
  });

  it('with nothing running resolves with no reports', async () => {
    expect(await scene.runner.shutdown({ deadlineMs: 1000, reason: 'deploy' })).toEqual([]);
  });

  it('resolves at its deadline with the reports finished by then; the stop of a body that ignores its signal runs on to its end', async () => {
    const slow = new TurnRunner({ registry, ledger: scene.ledger, graceMs: 1500 });
    let entered!: () => void;
    const inside = new Promise<void>((r) => { entered = r; });
    let finish!: () => void;
    const ignores = slow.run('s', async () => { entered(); await new Promise<void>((r) => { finish = r; }); }, { turnId: 'deaf' });
    await inside;
    let turnEnded = false;
    void ignores.then(() => { turnEnded = true; });
    const reports = await slow.shutdown({ deadlineMs: 50 });
    expect(reports).toEqual([]);
    expect(turnEnded).toBe(false); // resolved at the deadline, before the 1.5 s grace ran out
    const outcome = await ignores; // the stop goes on: grace, then the turn is abandoned and cancelled
    expect(outcome.status).toBe('cancelled');
    expect(outcome.status === 'cancelled' && outcome.report).toMatchObject({ reason: 'cancel.shutdown', bodyAbandoned: true });
    finish();
  });

  it('awaits what holdShutdown registered after its stops; a removed hold is not called', async () => {
    const { outcome: a } = await sleepingTurn('a', 'held');
    let seen: readonly unknown[] | undefined;
    let done = false;
    let removedCalled = false;
    runnerHooks(scene.runner)!.holdShutdown(async (reports) => { seen = reports.map((r) => r.turnId); await new Promise((r) => setTimeout(r, 100)); done = true; });
    const remove = runnerHooks(scene.runner)!.holdShutdown(async () => { removedCalled = true; });
    remove();
    await scene.runner.shutdown();
    expect(seen).toEqual(['held']);
    expect(done).toBe(true);
    expect(removedCalled).toBe(false);
    await a;
  });

  it('a hold that never settles does not outlast the deadline: shutdown resolves at it with the reports', async () => {
    const { outcome: a } = await sleepingTurn('a', 'stuck-hold');
    const entered = new Promise<void>((resolve) => {
      runnerHooks(scene.runner)!.holdShutdown(() => { resolve(); return new Promise(() => {}); });
    });
    const deadlineMs = 500;
    const t0 = performance.now();
    const reports = await scene.runner.shutdown({ deadlineMs });
    const took = performance.now() - t0;
    await entered; // the hold was called (after the stops), and is still pending
    expect(reports.map((r) => r.turnId)).toEqual(['stuck-hold']);
    expect(took).toBeGreaterThanOrEqual(deadlineMs - 5); // held up to the deadline…
    expect(took).toBeLessThan(deadlineMs + 5000); // …and not past it (a liveness bound)
    await a;
  });

  it('refuses bad options naming them, and then has not begun', async () => {
    expect(() => scene.runner.shutdown({ deadlineMs: -5 })).toThrow(/options\.deadlineMs/);
    expect(() => scene.runner.shutdown({ reason: '' })).toThrow(/options\.reason/);
    expect((await scene.runner.run('s', async () => 1)).status).toBe('completed');
  });
});
