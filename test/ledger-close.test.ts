/**
 * `ledger.close()` waits (at most `closeWaitMs`) for the stops under way to write and flush their
 * history: README's SIGTERM recipe (`shutdown` with a deadline, `pool.close()`, `ledger.close()`)
 * leaves every stopped turn complete on disk even when the deadline passes mid-stop.
 */
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { Ledger, TurnRunner, type LedgerEntry } from '../dist/src/index.js';
import { deafTurns } from './support/deaf-turns.js';
import { runnerScene } from './support/runner-scene.js';

const scene = runnerScene('fullstop-ledger-close-', { graceMs: 400 });

describe('close waits for the stops under way', () => {
  it("README's SIGTERM recipe (shutdown past its deadline, pool.close, ledger.close) leaves every stopped turn complete on disk", async () => {
    const { outcomes, release } = await deafTurns(scene.runner, 3);
    // The recipe, with a deadline shorter than the stops' grace: shutdown resolves mid-stop.
    const reports = await scene.runner.shutdown({ deadlineMs: 20 });
    expect(reports).toEqual([]);
    await scene.pool.close();
    await scene.ledger.close();

    const byTurn = new Map<string, LedgerEntry[]>();
    for (const e of scene.onDisk()) (byTurn.get(e.turnId) ?? byTurn.set(e.turnId, []).get(e.turnId)!).push(e);
    for (let i = 0; i < 3; i++) {
      const history = byTurn.get(`t${i}`)!;
      expect(history.map((e) => e.type), `t${i}`).toEqual(['turn_started', 'say', 'tool_call', 'status', 'tool_aborted', 'turn_aborted', 'status']);
      expect(history[3]).toMatchObject({ status: 'cancelling', reason: 'cancel.shutdown' });
      expect(history.at(-1)).toMatchObject({ status: 'cancelled', reason: 'cancel.shutdown' });
    }
    release();
    const settled = await Promise.all(outcomes);
    expect(settled.map((o) => o.status)).toEqual(['cancelled', 'cancelled', 'cancelled']);
    expect(settled.every((o) => o.status === 'cancelled' && o.report?.ledgerError === undefined)).toBe(true);
  });

  it('waits at most closeWaitMs: past it the ledger closes and the stop still runs, its report saying the ledger closed', async () => {
    const ledger = await Ledger.open(join(scene.dir, 'bounded.jsonl'), { closeWaitMs: 50 });
    const runner = new TurnRunner({ registry: scene.registry, ledger, graceMs: 60_000 });
    const { outcomes, release, signalled } = await deafTurns(runner, 1);
    const stopped = runner.stop('s0');
    await signalled;
    await ledger.close(); // the stop's grace is a minute: close does not wait for it
    const history = (await ledger.entries()).map((e) => e.type);
    expect(history).toEqual(['turn_started', 'say', 'tool_call', 'status']);
    release();
    const report = await stopped;
    expect(report?.ledgerError?.message).toMatch(/closed/);
    expect((await outcomes[0])!.status).toBe('cancelled');
  });

  it('takes only the stopping turns\' appends while it waits', async () => {
    const { outcomes, release, signalled } = await deafTurns(scene.runner, 1);
    const stopped = scene.runner.stop('s0');
    await signalled;
    const closed = scene.ledger.close();
    await expect(scene.ledger.append({ sessionId: 'other', turnId: 'x', type: 'turn_started' })).rejects.toThrow(/closed/);
    await closed;
    expect((await stopped)?.ledgerError).toBeUndefined();
    release();
    await outcomes[0];
    expect(scene.onDisk().some((e) => e.turnId === 'x')).toBe(false);
  });
});
