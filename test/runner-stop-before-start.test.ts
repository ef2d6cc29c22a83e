/**
 * Stop before start: a Stop pressed in the gap between Send and the server opening the turn still
 * stops that turn, and only it.
 */
import { describe, expect, it } from 'vitest';
import { MAX_ID_LENGTH, TurnRunner, type LedgerEntry, type StopRequest } from '../dist/src/index.js';
import { MAX_PENDING_STOPS, MAX_PENDING_STOPS_PER_SESSION } from '../dist/src/constants.js';
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

  it('expires after pendingStopMs, not before', async () => {
    const ttl = 300;
    const quick = new TurnRunner({ registry, graceMs: 100, pendingStopMs: ttl });
    expect(quick.pendingStopMs).toBe(ttl);
    const early = quick.requestStop('s', { turnId: 'early' });
    const late = quick.requestStop('s', { turnId: 'late' });
    expect(early).toMatchObject({ outcome: 'pending' });
    // Within its time: kept.
    expect((await quick.run('s', async () => 'ran', { turnId: 'early' })).status).toBe('cancelled');
    expect(quick.pendingStopCount).toBe(1);
    // Past its time (the answer says when): forgotten, and the turn runs.
    const { expiresAt } = late as Extract<StopRequest, { outcome: 'pending' }>;
    await new Promise((r) => setTimeout(r, expiresAt - Date.now() + 20));
    expect(quick.pendingStopCount).toBe(0);
    expect(await quick.run('s', async () => 'ran', { turnId: 'late' })).toMatchObject({ status: 'completed', value: 'ran' });
    expect(new TurnRunner({ registry }).pendingStopMs).toBe(60_000);
  });

  it('keeps its grace and its reason', async () => {
    const kept = scene.runner.requestStop('s', { turnId: 'slow', graceMs: 7777, reason: 'cancel.client' });
    expect(kept).toMatchObject({ outcome: 'pending', graceMs: 7777, reason: 'cancel.client' });
    const outcome = await scene.runner.run('s', async () => 'ran', { turnId: 'slow' });
    expect(outcome.status === 'cancelled' && outcome.report).toMatchObject({ graceMs: 7777, reason: 'cancel.client' });
  });

  it('with pendingStopMs 0 is refused, and says so (stop() still returns null)', async () => {
    const none = new TurnRunner({ registry, graceMs: 100, pendingStopMs: 0 });
    const refused: unknown[] = [];
    none.on('stop_refused', (p) => refused.push(p));
    expect(none.requestStop('s', { turnId: 't' })).toEqual({ outcome: 'refused', sessionId: 's', turnId: 't', reason: 'cancel.user', why: 'disabled' });
    expect(await none.stop('s', { turnId: 't' })).toBeNull();
    expect(refused).toEqual([
      { sessionId: 's', turnId: 't', reason: 'cancel.user', why: 'disabled' },
      { sessionId: 's', turnId: 't', reason: 'cancel.user', why: 'disabled' },
    ]);
    expect((await none.run('s', async () => 'ran', { turnId: 't' })).status).toBe('completed');
  });

  it('answers pending with its expiry and emits stop_pending; a repeat keeps the first', async () => {
    const events: unknown[] = [];
    scene.runner.on('stop_pending', (p) => events.push(p));
    const before = Date.now();
    const first = scene.runner.requestStop('s', { turnId: 't', reason: 'cancel.client', graceMs: 50 });
    expect(first).toMatchObject({ outcome: 'pending', sessionId: 's', turnId: 't', reason: 'cancel.client', graceMs: 50 });
    const { expiresAt } = first as Extract<StopRequest, { outcome: 'pending' }>;
    expect(expiresAt).toBeGreaterThanOrEqual(before + 60_000);
    expect(expiresAt).toBeLessThanOrEqual(Date.now() + 60_000);
    expect(scene.runner.requestStop('s', { turnId: 't', reason: 'other' })).toEqual(first);
    const payload = { sessionId: 's', turnId: 't', reason: 'cancel.client', graceMs: 50, expiresAt };
    expect(events).toEqual([payload, payload]);
    expect(scene.runner.pendingStopCount).toBe(1);
    expect((await scene.runner.run('s', async () => 1, { turnId: 't' })).status).toBe('cancelled');
    expect(scene.runner.pendingStopCount).toBe(0);
  });

  it('survives a flood of other sessions\' stops: past the book\'s bound new ones are refused, never a kept one dropped', async () => {
    const quiet = new TurnRunner({ registry, graceMs: 100 });
    const refusals = new Map<string, number>();
    quiet.on('stop_refused', ({ why }) => refusals.set(why, (refusals.get(why) ?? 0) + 1));
    expect(await quiet.stop('user', { turnId: 'mine' })).toBeNull();
    // 20,000 stops with made-up turn ids for 200 other sessions (100 each: each session's most).
    for (let i = 0; i < 2 * MAX_PENDING_STOPS; i++) await quiet.stop(`other-${i % 200}`, { turnId: `made-up-${i}` });
    expect(quiet.pendingStopCount).toBe(MAX_PENDING_STOPS);
    expect(refusals.get('book_full')).toBe(2 * MAX_PENDING_STOPS - (MAX_PENDING_STOPS - 1));
    expect(quiet.requestStop('late', { turnId: 't' })).toMatchObject({ outcome: 'refused', why: 'book_full' });
    expect((await quiet.run('user', async () => 'ran', { turnId: 'mine' })).status).toBe('cancelled');
    // Its place is free again: the next stop is kept.
    expect(quiet.requestStop('late', { turnId: 't' })).toMatchObject({ outcome: 'pending' });
  });

  it('bounds one session: past its most, its own new stops are refused and its earlier ones stay', async () => {
    const quiet = new TurnRunner({ registry, graceMs: 100 });
    expect(quiet.requestStop('s', { turnId: 'first' })).toMatchObject({ outcome: 'pending' });
    for (let i = 1; i < MAX_PENDING_STOPS_PER_SESSION; i++) expect(quiet.requestStop('s', { turnId: `t${i}` }).outcome).toBe('pending');
    expect(quiet.requestStop('s', { turnId: 'one-too-many' })).toEqual({
      outcome: 'refused', sessionId: 's', turnId: 'one-too-many', reason: 'cancel.user', why: 'session_full',
    });
    expect(quiet.requestStop('neighbour', { turnId: 'n' })).toMatchObject({ outcome: 'pending' }); // other sessions are not held by it
    expect(quiet.pendingStopCount).toBe(MAX_PENDING_STOPS_PER_SESSION + 1);
    expect((await quiet.run('s', async () => 'ran', { turnId: 'first' })).status).toBe('cancelled');
    expect((await quiet.run('s', async () => 'ran', { turnId: 'one-too-many' })).status).toBe('completed');
  });

  it('is not recorded for a turn id already in the ledger: the answer says the turn is over, and nothing is kept', async () => {
    await scene.runner.run('s', async () => 1, { turnId: 'done' });
    const pending: unknown[] = [];
    scene.runner.on('stop_pending', (p) => pending.push(p));
    expect(scene.runner.requestStop('s', { turnId: 'done' })).toEqual({ outcome: 'already_finished', sessionId: 's', turnId: 'done', status: 'completed' });
    expect(await scene.runner.stop('s', { turnId: 'done' })).toBeNull();
    expect(scene.runner.pendingStopCount).toBe(0);
    expect(pending).toEqual([]);
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
    expect(scene.runner.pendingStopCount).toBe(0);
    expect((await scene.runner.run('s', async () => 1, { turnId: '5' })).status).toBe('completed');
  });

  it('a session id or turn id longer than MAX_ID_LENGTH (1 MB here) is a RangeError naming it; nothing is kept or written', async () => {
    const huge = 'x'.repeat(1_000_000);
    const bytesBefore = scene.onDisk().length;
    for (const attempt of [
      () => scene.runner.stop(huge, { turnId: 't' }),
      () => scene.runner.requestStop(huge, { turnId: 't' }),
      () => scene.runner.requestStop(huge),
    ]) {
      expect(attempt).toThrow(RangeError);
      expect(attempt).toThrow(/^sessionId/);
    }
    for (const attempt of [() => scene.runner.stop('s', { turnId: huge }), () => scene.runner.requestStop('s', { turnId: huge })]) {
      expect(attempt).toThrow(RangeError);
      expect(attempt).toThrow(/^options\.turnId/);
    }
    expect(() => scene.runner.stop('s', { turnId: 't', reason: huge })).toThrow(/^options\.reason/);
    expect(scene.runner.pendingStopCount).toBe(0);
    await expect(scene.runner.run(huge, async () => 1)).rejects.toThrow(RangeError);
    await expect(scene.runner.run(huge, async () => 1)).rejects.toThrow(/^sessionId/);
    await expect(scene.runner.run('s', async () => 1, { turnId: huge })).rejects.toThrow(RangeError);
    await expect(scene.runner.run('s', async () => 1, { turnId: huge })).rejects.toThrow(/^options\.turnId/);
    // The longest id allowed is kept, as a stop for a turn that has not started.
    const longest = 'y'.repeat(MAX_ID_LENGTH);
    expect(scene.runner.requestStop(longest, { turnId: longest })).toMatchObject({ outcome: 'pending' });
    expect(scene.runner.pendingStopCount).toBe(1);
    expect(scene.onDisk().length).toBe(bytesBefore);
  });
});
