/**
 * Stop before start: a Stop pressed in the gap between Send and the server opening the turn still
 * stops that turn, and only it.
 */
import { describe, expect, it } from 'vitest';
import { TurnRunner, type LedgerEntry } from '../dist/src/index.js';
import { runnerScene } from './support/runner-scene.js';

const scene = runnerScene('fullstop-stop-before-start-');
const { registry } = scene;

function onDisk(turnId?: string): LedgerEntry[] {
  const all = scene.onDisk();
  return turnId === undefined ? all : all.filter((e) => e.turnId === turnId);
}

const typeOf = (e: LedgerEntry) => (e.type === 'status' ? `status:${e.status}` : e.type);

describe('a stop of a turn id that has not started', () => {
  it('returns null, and that turn then runs nothing of its body and ends cancelled with the stop\'s reason', async () => {
    expect(await scene.runner.stop('s', { turnId: 't1', reason: 'cancel.client' })).toBeNull();
    let ran = false;
    const aborted: unknown[] = [];
    scene.runner.on('turn_aborted', (p) => aborted.push(p.report.reason));
    const outcome = await scene.runner.run('s', async () => { ran = true; }, { turnId: 't1', input: 'hello' });
    expect(ran).toBe(false);
    expect(outcome.status).toBe('cancelled');
    expect(outcome.status === 'cancelled' && outcome.report.reason).toBe('cancel.client');
    expect(aborted).toEqual(['cancel.client']);
    expect(onDisk('t1').map(typeOf)).toEqual(['turn_started', 'status:cancelling', 'turn_aborted', 'status:cancelled']);
    expect(onDisk('t1')[0]).toMatchObject({ type: 'turn_started', input: 'hello' });
    expect(onDisk('t1').at(-1)).toMatchObject({ reason: 'cancel.client' });
  });

  it('is kept while another turn of the session runs, which it leaves untouched', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => { release = r; });
    let entered!: () => void;
    const inside = new Promise<void>((r) => { entered = r; });
    const first = scene.runner.run('s', async (turn) => { entered(); await gate; return turn.signal.aborted; }, { turnId: 'running' });
    await inside;
    expect(await scene.runner.stop('s', { turnId: 'next' })).toBeNull();
    release();
    expect(await first).toMatchObject({ status: 'completed', value: false });
    let ran = false;
    expect((await scene.runner.run('s', async () => { ran = true; }, { turnId: 'next' })).status).toBe('cancelled');
    expect(ran).toBe(false);
  });

  it('is for its session only, and taken once', async () => {
    await scene.runner.stop('a', { turnId: 't' });
    expect((await scene.runner.run('b', async () => 1, { turnId: 'other' })).status).toBe('completed');
    expect((await scene.runner.run('b', async () => 2, { turnId: 't' })).status).toBe('completed'); // session b: not the stopped pair
    const other = new TurnRunner({ registry, graceMs: 100 }); // no ledger: a turn id can run twice
    await other.stop('a', { turnId: 'x' });
    expect((await other.run('a', async () => 1, { turnId: 'x' })).status).toBe('cancelled');
    expect((await other.run('a', async () => 1, { turnId: 'x' })).status).toBe('completed');
  });

  it('expires after pendingStopMs', async () => {
    const quick = new TurnRunner({ registry, graceMs: 100, pendingStopMs: 0 });
    expect(quick.pendingStopMs).toBe(0);
    await quick.stop('s', { turnId: 't' });
    expect((await quick.run('s', async () => 'ran', { turnId: 't' }))).toMatchObject({ status: 'completed', value: 'ran' });
    expect(new TurnRunner({ registry }).pendingStopMs).toBe(60_000);
  });

  it('keeps at most 10,000, dropping the oldest first', async () => {
    const quiet = new TurnRunner({ registry, graceMs: 100 });
    await quiet.stop('s', { turnId: 'oldest' });
    await quiet.stop('s', { turnId: 'kept' });
    for (let i = 0; i < 9_999; i++) await quiet.stop('s', { turnId: `flood-${i}` });
    expect((await quiet.run('s', async () => 'ran', { turnId: 'oldest' })).status).toBe('completed');
    expect((await quiet.run('s', async () => 'ran', { turnId: 'kept' })).status).toBe('cancelled');
  });

  it('is not recorded for a turn id already in the ledger', async () => {
    await scene.runner.run('s', async () => 1, { turnId: 'done' });
    expect(await scene.runner.stop('s', { turnId: 'done' })).toBeNull();
    expect(onDisk('done').map(typeOf)).toEqual(['turn_started', 'status:completed']);
  });
});

describe('a stop without a turn id between turns', () => {
  it('stays a no-op: the next turn runs', async () => {
    expect(await scene.runner.stop('s')).toBeNull();
    expect((await scene.runner.run('s', async () => 'ran')).status).toBe('completed');
  });
});

describe('a stop with the running turn\'s id', () => {
  it('stops it; with another turn id it does not', async () => {
    let entered!: () => void;
    const inside = new Promise<void>((r) => { entered = r; });
    const run = scene.runner.run('s', async (turn) => {
      entered();
      await new Promise((r) => turn.signal.addEventListener('abort', r));
    }, { turnId: 'live' });
    await inside;
    expect(await scene.runner.stop('s', { turnId: 'not-this-one' })).toBeNull();
    const report = await scene.runner.stop('s', { turnId: 'live' });
    expect(report).toMatchObject({ turnId: 'live', reason: 'cancel.user', settledCooperatively: true });
    expect((await run).status).toBe('cancelled');
  });
});

describe('bad arguments', () => {
  it('are refused naming the option, and nothing is kept', async () => {
    expect(() => scene.runner.stop('s', { turnId: '' })).toThrow(/options\.turnId/);
    expect(() => scene.runner.stop('s', { turnId: 5 as unknown as string })).toThrow(TypeError);
    expect(() => new TurnRunner({ registry, pendingStopMs: -1 })).toThrow(RangeError);
    expect(() => new TurnRunner({ registry, pendingStopMs: -1 })).toThrow(/options\.pendingStopMs/);
    expect((await scene.runner.run('s', async () => 1, { turnId: '5' })).status).toBe('completed');
  });
});
