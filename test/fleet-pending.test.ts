/**
 * Stop before start across instances, on one Redis and on Redis Cluster: a stop naming a turn id
 * no instance has registered is kept (`pending`, nothing published) and that turn, run on any
 * instance, starts nothing of its body and ends `cancelled` with the stop's reason; the pending
 * stop expires after `pendingStopMs`.
 */
import { describe, expect, it } from 'vitest';
import { backendScene, backends } from './fixtures/fleet/backends.js';
import { eventually, held } from './fixtures/fleet/scene.js';
import type { FleetRedisClient } from '../dist/src/fleet/index.js';

/** Redis's clock (ms) on the node that holds `key` (the scripts' `now`). */
async function redisNow(c: FleetRedisClient, key: string): Promise<number> {
  const [sec, usec] = ('masters' in c ? await c.sendCommand(key, true, ['TIME']) : await c.sendCommand(['TIME'])) as [string, string];
  return Number(sec) * 1000 + Math.floor(Number(usec) / 1000);
}

/** The session's pending stops as Redis keeps them: turn id → its `untilMs`. */
async function pendingOf(c: FleetRedisClient, key: string): Promise<Map<string, number>> {
  const reply = ('masters' in c ? await c.sendCommand(key, true, ['HGETALL', key]) : await c.sendCommand(['HGETALL', key])) as Record<string, string>;
  return new Map(Object.entries(reply).map(([id, json]) => [id, (JSON.parse(json) as { untilMs: number }).untilMs]));
}

for (const backend of await backends('fleet-pending')) {
  describe.skipIf(!backend.up)(`stop before start, on ${backend.name}`, () => {
    const current = backendScene(backend);

    it('a stop of a turn id nobody registered answers pending, publishes nothing, and that turn then starts cancelled on another instance', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B');
      const c = await current.scene.instance('C');
      // A's channel: anything published to the owner-to-be would arrive here.
      const heard: string[] = [];
      const listener = await backend.client();
      await listener.subscribe(`${current.scene.prefix}:node:${a.fleet.nodeId}`, (m) => heard.push(m));
      try {
        expect(await b.fleet.stop('s1', { turnId: 't1', reason: 'cancel.client' })).toEqual({ outcome: 'pending', sessionId: 's1', turnId: 't1' });
        // A stop without turnId still answers not_found for a session with no turn.
        expect(await b.fleet.stop('s1')).toEqual({ outcome: 'not_found', sessionId: 's1' });

        const h = held();
        const events: string[] = [];
        a.runner.on('turn_started', () => events.push('turn_started'));
        a.runner.on('turn_aborted', () => events.push('turn_aborted'));
        const outcome = await a.fleet.run('s1', h.body, { turnId: 't1' });
        expect(h.calls()).toBe(0);
        expect(outcome).toMatchObject({ status: 'cancelled', turnId: 't1', epoch: 1 });
        expect(outcome.report?.reason).toBe('cancel.client');
        expect(events).toContain('turn_aborted');
        expect(await c.fleet.turn('s1')).toMatchObject({ turnId: 't1', status: 'cancelled', stopRequested: true, reason: 'cancel.client', requester: b.fleet.nodeId });
        expect(await c.fleet.stop('s1', { turnId: 't1' })).toMatchObject({ outcome: 'already_finished', status: 'cancelled' });
        // The pending stop was taken: the session's next turn runs.
        expect(await a.fleet.run('s1', async () => 7, { turnId: 't2' })).toMatchObject({ status: 'completed', value: 7 });
        expect(heard).toEqual([]);
      } finally {
        listener.destroy();
      }
    });

    it('a pending stop leaves a running turn of the session alone, and expires after pendingStopMs', async () => {
      const a = await current.scene.instance('A', { pendingStopMs: 300 });
      const b = await current.scene.instance('B', { pendingStopMs: 300 });
      const h = held();
      const run = a.fleet.run('s1', h.body, { turnId: 't1' });
      const turn = await h.started;
      expect(await b.fleet.stop('s1', { turnId: 't2' })).toEqual({ outcome: 'pending', sessionId: 's1', turnId: 't2' });
      expect(turn.signal.aborted).toBe(false);
      expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 't1', status: 'running', stopRequested: false });
      h.release();
      expect(await run).toMatchObject({ status: 'completed' });
      // Expired: the pending-stops key is gone, and t2 runs to its end.
      await eventually(async () => !(await backend.keys(current.scene.prefix)).some((k) => k.endsWith(':pending')), 5000, 'the pending stop to expire');
      expect(await a.fleet.run('s1', async () => 2, { turnId: 't2' })).toMatchObject({ status: 'completed', value: 2 });
    });

    it('keeps at most maxPendingStops per session: past it a stop is refused (why session_full) and not kept; other sessions\' pending stops are untouched', async () => {
      const a = await current.scene.instance('A', { maxPendingStops: 20 });
      const b = await current.scene.instance('B', { maxPendingStops: 20 });
      const raw = await backend.client();
      try {
        // The user's own stop, then a flood of made-up turn ids for another session.
        expect(await b.fleet.stop('user', { turnId: 'mine', reason: 'cancel.client' })).toEqual({ outcome: 'pending', sessionId: 'user', turnId: 'mine' });
        const answers = await Promise.all(Array.from({ length: 60 }, (_, i) => b.fleet.stop('flood', { turnId: `fake-${i}` })));
        expect(answers.filter((x) => x.outcome === 'pending')).toHaveLength(20);
        const full = answers.filter((x) => x.outcome === 'refused');
        expect(full).toHaveLength(40);
        expect(full[0]).toEqual({ outcome: 'refused', sessionId: 'flood', turnId: expect.stringMatching(/^fake-/), reason: 'cancel.user', why: 'session_full' });
        const floodKey = `${current.scene.prefix}:{flood}:pending`;
        expect((await pendingOf(raw, floodKey)).size).toBe(20);
        // A repeat of a kept one still answers pending (it joins the first).
        const kept = answers.findIndex((x) => x.outcome === 'pending');
        expect(await b.fleet.stop('flood', { turnId: `fake-${kept}` })).toMatchObject({ outcome: 'pending' });
        // The user's stop survived the flood: its turn starts cancelled.
        const outcome = await a.fleet.run('user', async () => 'ran', { turnId: 'mine' });
        expect(outcome).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.client' } });
        // A refused turn id runs when it starts (the stop was not kept, as its answer said).
        const refused = full[0]!.outcome === 'refused' ? full[0]!.turnId : '';
        expect(await a.fleet.run('flood', async () => 'ran', { turnId: refused })).toMatchObject({ status: 'completed', value: 'ran' });
      } finally {
        raw.destroy();
      }
    });

    it('prunes expired pending stops whenever one is added: a session stopped again and again keeps only the live ones', async () => {
      const b = await current.scene.instance('B', { pendingStopMs: 400 });
      const raw = await backend.client();
      const key = `${current.scene.prefix}:{s1}:pending`;
      try {
        expect(await b.fleet.stop('s1', { turnId: 'old' })).toMatchObject({ outcome: 'pending' });
        const oldUntil = (await pendingOf(raw, key)).get('old')!;
        // A second stop while the first still lives keeps the key alive past the first's expiry.
        await eventually(async () => (await redisNow(raw, key)) > oldUntil - 200, 5000, 'half the first stop\'s life');
        expect(await b.fleet.stop('s1', { turnId: 'middle' })).toMatchObject({ outcome: 'pending' });
        await eventually(async () => (await redisNow(raw, key)) > oldUntil, 5000, 'the first stop to expire');
        expect(await b.fleet.stop('s1', { turnId: 'new' })).toMatchObject({ outcome: 'pending' });
        const left = await pendingOf(raw, key);
        expect([...left.keys()].sort()).toEqual(['middle', 'new']);
        // The key lives as long as its newest entry, no longer.
        const pttl = Number('masters' in raw ? await raw.sendCommand(key, true, ['PTTL', key]) : await raw.sendCommand(['PTTL', key]));
        expect(pttl).toBeGreaterThan(0);
        expect(pttl).toBeLessThanOrEqual(400);
      } finally {
        raw.destroy();
      }
    });

    it('a pending stop reaches its turn with its reason and grace even when the owner runner keeps no pending stops (pendingStopMs: 0)', async () => {
      const a = await current.scene.instance('A', {}, { pendingStopMs: 0 });
      const b = await current.scene.instance('B');
      expect(await b.fleet.stop('s1', { turnId: 't1', reason: 'cancel.client', graceMs: 777 })).toEqual({ outcome: 'pending', sessionId: 's1', turnId: 't1' });
      let ran = false;
      const outcome = await a.fleet.run('s1', async () => { ran = true; return 'ran'; }, { turnId: 't1' });
      expect(ran).toBe(false);
      expect(outcome).toMatchObject({ status: 'cancelled', turnId: 't1', report: { reason: 'cancel.client', graceMs: 777 } });
      expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 't1', status: 'cancelled', reason: 'cancel.client' });
    });
  });
}
