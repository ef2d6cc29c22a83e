/**
 * A runner stop keeps its promises under faults: any cancel of the turn's token is governed by the
 * runner's grace, nothing of a turn starts once its stop began, and bad options change nothing.
 * (A failing ledger: runner-broken-ledger.test.ts.)
 */
import { describe, expect, it, vi } from 'vitest';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  exec, isCancelledError, TurnRunner, type LedgerEntry,
} from '../dist/src/index.js';
import { spyOnFdatasync } from './support/fdatasync-spy.js';
import { flags, started } from './support/handshake.js';
import { runnerScene } from './support/runner-scene.js';
import { eventually } from './support/leaks.js';

const scene = runnerScene('fullstop-runner-faults-');
const { registry, pool } = scene;

function lines(path: string): LedgerEntry[] {
  return readFileSync(path, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l) as LedgerEntry);
}

const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${(e as { status: string }).status}` : e.type);

describe('any cancel of the turn token is a stop under the runner\'s grace', () => {
  it('registry.markCancelled: the pool\'s own 50 ms timer does not hard-stop first; the runner\'s grace does, and the report counts it', async () => {
    const f = flags();
    let rejectedAt = 0;
    const outcome$ = scene.runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' }))
      .catch((e) => { rejectedAt = performance.now(); throw e; }));
    await started(f);
    const t0 = performance.now();
    registry.markCancelled('s');
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(rejectedAt - t0).toBeGreaterThanOrEqual(95);
    expect(outcome.report).toMatchObject({ reason: 'cancel.session', settledCooperatively: false, hardStopped: { workers: 1 } });
    expect(outcome.report!.settledAt).toBeGreaterThanOrEqual(95);
  });

  it('registry.markCancelled with an exec child that ignores SIGTERM: exec\'s own 50 ms grace does not SIGKILL first', async () => {
    const ready = join(scene.dir, 'ready');
    let resultAt = 0;
    let forced: boolean | undefined;
    const runner600 = new TurnRunner({ registry, pool, ledger: scene.ledger, graceMs: 600 });
    const outcome$ = runner600.run('s', (turn) => turn.tool('sh', {}, async (token) => {
      const r = await exec('sh', ['-c', `trap '' TERM; touch ${ready}; while :; do sleep 1; done`], { token, graceMs: 50 });
      resultAt = performance.now();
      forced = r.forced;
      return r.exitCode;
    }));
    await eventually(() => existsSync(ready), 5000, 'the shell to start');
    const t0 = performance.now();
    registry.markCancelled('s');
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(outcome.report).toMatchObject({ settledCooperatively: false, hardStopped: { processGroups: 1 } });
    expect(outcome.report!.settledAt).toBeGreaterThanOrEqual(595);
    expect(resultAt - t0).toBeGreaterThanOrEqual(595);
    expect(forced).toBe(true);
  });

  it('cancelTurn() in a worker: the same', async () => {
    const f = flags();
    let rejectedAt = 0;
    const runner600 = new TurnRunner({ registry, pool, ledger: scene.ledger, graceMs: 600 });
    const t0 = performance.now();
    const outcome = await runner600.run('s', (turn) => turn.tool('trips', {}, (token) => pool.run({ flags: f }, { token, name: 'cancelsTurnThenSpins' }))
      .catch((e) => { rejectedAt = performance.now(); throw e; }));
    expect(outcome.status).toBe('cancelled');
    expect(rejectedAt - t0).toBeGreaterThanOrEqual(595);
    expect(outcome.report).toMatchObject({ graceMs: 600, settledCooperatively: false, hardStopped: { workers: 1 } });
  });

  it('the abort of a caller\'s signal given to run(): the same, with reason cancel.client and the signal\'s reason as detail', async () => {
    const f = flags();
    const caller = new AbortController();
    let rejectedAt = 0;
    const outcome$ = scene.runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' }))
      .catch((e) => { rejectedAt = performance.now(); throw e; }), { signal: caller.signal });
    await started(f);
    const t0 = performance.now();
    caller.abort('client went away');
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(rejectedAt - t0).toBeGreaterThanOrEqual(95);
    expect(outcome.report).toMatchObject({ reason: 'cancel.client', detail: 'client went away', settledCooperatively: false, hardStopped: { workers: 1 } });
  });

  it('an already aborted signal given to run() stops the turn before its body starts', async () => {
    let bodyRan = false;
    const outcome = await scene.runner.run('s', async () => { bodyRan = true; }, { signal: AbortSignal.abort('gone') });
    expect(bodyRan).toBe(false);
    expect(outcome).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.client', detail: 'gone' } });
    await expect(scene.runner.run('s', async () => 1, { signal: 'nope' } as never)).rejects.toThrow(/options\.signal: expected an AbortSignal/);
  });

  it('a worker hard-stopped by the pool\'s own timer during the stop (its call was cancelled alone just before) is counted and the stop is not cooperative', async () => {
    const f = flags();
    const controller = new AbortController();
    // The call's own grace (500 ms) starts before the stop and ends inside the stop's (5 s).
    const outcome$ = scene.runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, signal: controller.signal, name: 'spins', graceMs: 500 })));
    await started(f);
    controller.abort('this call only');
    const report = await scene.runner.stop('s', { graceMs: 5000 });
    expect(report).toMatchObject({ settledCooperatively: false, hardStopped: { workers: 1 } });
    expect(report!.settledAt).toBeLessThan(4000); // the grace ended when the pool's timer settled the task
    expect((await outcome$).status).toBe('cancelled');
  });

  it('a reason String() cannot render (a second time) still stops the turn, with a safe rendering as the reason', async () => {
    const f = flags();
    const outcome$ = scene.runner.run('s', (turn) => turn.tool('spins', {}, (token) => pool.run({ flags: f }, { token, name: 'spins' })));
    await started(f);
    // The token renders it once for its signal's reason; every later rendering throws.
    let renders = 0;
    const hostile = { toString() { if (renders++ === 0) return 'first'; throw new Error('no second rendering'); } };
    registry.markCancelled('s', hostile);
    const outcome = await outcome$;
    expect(outcome.status).toBe('cancelled');
    expect(outcome.report!.reason).toBe('[object Object]');
    expect(lines(scene.ledger.path).filter((e) => e.type === 'status').map((e) => (e as { reason?: string }).reason)).toEqual(['[object Object]', '[object Object]']);
  });
});

describe('nothing of a turn starts after its stop began', () => {
  it('stop() right after run(): the body never starts', async () => {
    let bodyRan = false;
    const outcome$ = scene.runner.run('s', async (turn) => {
      bodyRan = true;
      await turn.tool('touch', {}, () => exec('touch', [join(scene.dir, 'touched')]));
    }, { turnId: 't-early' });
    const report = await scene.runner.stop('s');
    const outcome = await outcome$;
    expect(bodyRan).toBe(false);
    expect(existsSync(join(scene.dir, 'touched'))).toBe(false);
    expect(outcome).toMatchObject({ status: 'cancelled', report });
    expect(report).toMatchObject({ settledCooperatively: true, bodyAbandoned: false });
    expect(lines(scene.ledger.path).map(typeOf)).toEqual(['turn_started', 'status:cancelling', 'turn_aborted', 'status:cancelled']);
  });

  it('while `cancelling` is being fsynced, tool/ask/say reject with CancelledError and run or record nothing', async () => {
    let syncing!: () => void;
    const inSync = new Promise<void>((r) => { syncing = r; });
    let letSyncGo!: () => void;
    const syncGate = new Promise<void>((r) => { letSyncGo = r; });
    let proceed!: () => void;
    const bodyGate = new Promise<void>((r) => { proceed = r; });
    let tried!: (r: PromiseSettledResult<unknown>[]) => void;
    const attempts = new Promise<PromiseSettledResult<unknown>[]>((r) => { tried = r; });
    let toolRan = false;
    let running!: () => void;
    const bodyRuns = new Promise<void>((r) => { running = r; });
    const outcome$ = scene.runner.run('s', async (turn) => {
      running();
      await bodyGate;
      tried(await Promise.allSettled([
        turn.tool('touch', {}, async () => { toolRan = true; }), turn.ask('sure?'), turn.say('more'),
      ]));
    });
    await bodyRuns;
    spyOnFdatasync(async () => {
      syncing();
      await syncGate;
    });
    const report$ = scene.runner.stop('s');
    await inSync; // the stop is inside its intent's fdatasync; the token is not tripped yet
    proceed();
    const results = await attempts;
    letSyncGo();
    await report$;
    await outcome$;
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'rejected']);
    for (const r of results) expect(isCancelledError((r as PromiseRejectedResult).reason)).toBe(true);
    expect(toolRan).toBe(false);
    expect(lines(scene.ledger.path).map(typeOf)).toEqual(['turn_started', 'status:cancelling', 'turn_aborted', 'status:cancelled']);
  });
});

describe('bad options are refused and change nothing', () => {
  it.each([
    ['null options', null, TypeError, /^options: expected an object/],
    ['a registry that is not one', { registry: {} }, TypeError, /options\.registry: expected a TurnRegistry/],
    ['a pool that is not a TurnPool', { pool: { run() {} } }, TypeError, /options\.pool: expected a TurnPool/],
    ['a ledger that is a path', { ledger: 'history.jsonl' }, TypeError, /options\.ledger: expected a Ledger/],
    ['a grace in a string', { graceMs: '100' }, TypeError, /options\.graceMs: expected a number/],
    ['a grace past the longest timer', { graceMs: 2 ** 31 }, RangeError, /options\.graceMs: .*2147483647/],
    ['a NaN grace', { graceMs: Number.NaN }, RangeError, /options\.graceMs/],
  ])('new TurnRunner with %s', (_label, options, type, message) => {
    expect(() => new TurnRunner(options as never)).toThrow(type);
    expect(() => new TurnRunner(options as never)).toThrow(message);
  });

  it('run() with bad options rejects before beginning a turn or writing anything', async () => {
    await expect(scene.runner.run('s', async () => 1, null as never)).rejects.toThrow(/^options: expected an object/);
    await expect(scene.runner.run('s', async () => 1, 'turn-1' as never)).rejects.toThrow(TypeError);
    await expect(scene.runner.run('s', async () => 1, { turnId: 7 } as never)).rejects.toThrow(/options\.turnId: expected a non-empty string/);
    expect(registry.stats().liveTokens).toBe(0);
    expect(readFileSync(scene.ledger.path, 'utf8')).toBe('');
    expect((await scene.runner.run('s', async () => 1)).status).toBe('completed');
  });

  it('stop() with bad options throws and leaves the running turn untouched', async () => {
    let release!: (v: string) => void;
    let running!: () => void;
    const bodyRuns = new Promise<void>((r) => { running = r; });
    const outcome$ = scene.runner.run('s', (turn) => new Promise<string>((r) => { release = r; running(); void turn; }));
    await bodyRuns;
    expect(() => scene.runner.stop('s', { graceMs: 2 ** 31 })).toThrow(RangeError);
    expect(() => scene.runner.stop('s', { graceMs: 2 ** 31 })).toThrow(/options\.graceMs/);
    expect(() => scene.runner.stop('s', null as never)).toThrow(/^options: expected an object/);
    expect(() => scene.runner.stop('s', { reason: '' })).toThrow(/options\.reason/);
    expect(() => scene.runner.stop('s', { reason: 5 } as never)).toThrow(TypeError);
    expect(registry.isCancelled('s')).toBe(false);
    release('done');
    expect(await outcome$).toMatchObject({ status: 'completed', value: 'done' });
    expect(lines(scene.ledger.path).map(typeOf)).toEqual(['turn_started', 'status:completed']);
  });
});
