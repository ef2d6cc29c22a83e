/**
 * A turn id is used once fleet-wide: `fleet.run` refuses a turn id running (or finished within
 * `finishedTtlMs`) in another session, before anything of the turn is registered or run, so a
 * client that learnt another user's turn id cannot end that user's turn (issue 49: the fleet's
 * keys are per session, so the id passed). On the shared Redis and on the local Redis Cluster
 * (the claim's key is in a slot of its own), each under a key prefix of its own.
 */
import { describe, expect, it } from 'vitest';
import { TurnIdUsedError } from '../dist/src/index.js';
import { FleetTurnRefusedError } from '../dist/src/fleet/index.js';
import { backends, backendScene } from './fixtures/fleet/backends.js';
import { eventually, held } from './fixtures/fleet/scene.js';
import { MemoryLedger } from './fixtures/fleet/memory-ledger.js';

const all = await backends('fleet-turn-ids');

for (const backend of all) {
  describe.skipIf(!backend.up)(`fleet turn ids on ${backend.name}`, () => {
    const current = backendScene(backend);

    it('a turn id running in another session is refused before anything runs, with a stop in the same step; the running turn goes on untouched', async () => {
      const history = new MemoryLedger(); // one history both instances write, as a shared store is
      const a = await current.scene.instance('A', {}, { ledger: history });
      const b = await current.scene.instance('B', {}, { ledger: history });
      const ha = held();
      const runA = a.fleet.run('s1', ha.body, { turnId: 'T' });
      const turnA = await ha.started;

      const hb = held();
      const runB = b.fleet.run('s2', hb.body, { turnId: 'T' });
      const stopB = b.fleet.stop('s2', { turnId: 'T', timeoutMs: 5000 });
      await expect(runB).rejects.toThrow(TurnIdUsedError);
      await expect(runB).rejects.toMatchObject({ code: 'ERR_FULLSTOP_TURN_ID_USED', turnId: 'T' });
      await expect(runB).rejects.not.toThrow(/s1/); // the refusal never names the other session
      expect(await stopB).toEqual({ outcome: 'pending', sessionId: 's2', turnId: 'T' });
      expect(hb.calls()).toBe(0);
      expect(b.registry.currentToken('s2')).toBeUndefined();
      expect(await b.fleet.turn('s2')).toBeNull();

      expect(turnA.signal.aborted).toBe(false);
      expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 'T', status: 'running', stopRequested: false });
      ha.release();
      expect(await runA).toMatchObject({ status: 'completed', turnId: 'T', value: 'done' });
      const entries = await history.entries({ turnId: 'T' });
      expect(new Set(entries.map((e) => e.sessionId))).toEqual(new Set(['s1']));
      expect(entries.map((e) => e.type)).toEqual(['turn_started', 'status']);
      expect(await history.entries({ sessionId: 's2' })).toEqual([]);
      // Nothing of a running turn is left: no turn record or lease entry for s2, only the finished claim.
      expect((await backend.keys(current.scene.prefix)).filter((k) => k.includes('{s2}') && !k.endsWith(':pending'))).toEqual([]);
    });
  });
}

const single = all[0]!;
describe.skipIf(!single.up)('fleet turn ids: the claim\'s life', () => {
  const current = backendScene(single);

  it('a turn id finished in another session is refused while its record lasts (finishedTtlMs), then free; its own session answers as before', async () => {
    const a = await current.scene.instance('A', { finishedTtlMs: 400 });
    const b = await current.scene.instance('B', { finishedTtlMs: 400 });
    expect(await a.fleet.run('s1', async () => 1, { turnId: 'T' })).toMatchObject({ status: 'completed' });
    await expect(b.fleet.run('s2', async () => 2, { turnId: 'T' })).rejects.toThrow(TurnIdUsedError);
    await expect(b.fleet.run('s1', async () => 2, { turnId: 'T' })).rejects.toThrow(/already recorded for session "s1"/);
    const claim = `${current.scene.prefix}:{t:T}:claim`;
    await eventually(async () => !(await single.keys(current.scene.prefix)).includes(claim), 5000, 'the finished claim to expire');
    expect(await b.fleet.run('s2', async () => 2, { turnId: 'T' })).toMatchObject({ status: 'completed', value: 2 });
  });

  it('a run refused before its turn began (its session busy) gives the turn id back at once', async () => {
    const a = await current.scene.instance('A');
    const b = await current.scene.instance('B');
    const h = held();
    const running = a.fleet.run('s1', h.body, { turnId: 'U' });
    await h.started;
    await expect(b.fleet.run('s1', async () => 1, { turnId: 'T' })).rejects.toThrow(FleetTurnRefusedError);
    expect(await b.fleet.run('s2', async () => 2, { turnId: 'T' })).toMatchObject({ status: 'completed', value: 2 });
    h.release();
    await running;
  });

  it('the claim lives as long as its lease is renewed: a turn running for several leases still holds its id', async () => {
    const a = await current.scene.instance('A', { leaseMs: 300 });
    const b = await current.scene.instance('B', { leaseMs: 300 });
    const h = held();
    const running = a.fleet.run('s1', h.body, { turnId: 'T' });
    const turn = await h.started;
    await new Promise((r) => setTimeout(r, 1200)); // four leases: the claim is alive only through its renewals
    await expect(b.fleet.run('s2', async () => 2, { turnId: 'T' })).rejects.toThrow(TurnIdUsedError);
    expect(turn.signal.aborted).toBe(false);
    h.release();
    expect(await running).toMatchObject({ status: 'completed' });
  });
});
