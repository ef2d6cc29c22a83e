/**
 * Stop before start across instances, on one Redis and on Redis Cluster: a stop naming a turn id
 * no instance has registered is kept (`pending`, nothing published) and that turn, run on any
 * instance, starts nothing of its body and ends `cancelled` with the stop's reason; the pending
 * stop expires after `pendingStopMs`.
 */
import { describe, expect, it } from 'vitest';
import { backendScene, backends } from './fixtures/fleet/backends.js';
import { eventually, held } from './fixtures/fleet/scene.js';

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
  });
}
