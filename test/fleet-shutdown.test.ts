/**
 * `runner.shutdown()` on an instance with a fleet, on one Redis and on Redis Cluster: by the time
 * it resolves, the fleet records of the turns it stopped say `cancelled` (reason
 * `cancel.shutdown`), so another instance's stop answers `already_finished` at once.
 */
import { describe, expect, it } from 'vitest';
import { client, RedisProxy, uniquePrefix } from './fixtures/fleet/support.js';
import { backendScene, backends } from './fixtures/fleet/backends.js';
import { FleetScene, held } from './fixtures/fleet/scene.js';

for (const backend of await backends('fleet-shutdown')) {
  describe.skipIf(!backend.up)(`shutdown with a fleet, on ${backend.name}`, () => {
    const current = backendScene(backend);

    it('the records of the turns shutdown stopped are cancelled (cancel.shutdown) before it resolves; a stop from another instance then answers already_finished', async () => {
      const a = await current.scene.instance('A');
      const b = await current.scene.instance('B');
      const sessions = ['s1', 's2', 's3'];
      const bodies = sessions.map(() => held());
      const runs = sessions.map((s, i) => a.fleet.run(s, bodies[i]!.body, { turnId: `t-${s}` }));
      await Promise.all(bodies.map((h) => h.started));

      const reports = await a.runner.shutdown();
      // Read before anything else of A runs: these are the records shutdown waited for.
      const records = await Promise.all(sessions.map((s) => b.fleet.turn(s)));
      expect(reports.map((r) => r.sessionId).sort()).toEqual(sessions);
      for (const [i, s] of sessions.entries()) {
        expect(records[i]).toMatchObject({ sessionId: s, turnId: `t-${s}`, status: 'cancelled', reason: 'cancel.shutdown' });
      }
      const t0 = performance.now();
      const answer = await b.fleet.stop('s1', { timeoutMs: 5000 });
      expect(answer).toEqual({ outcome: 'already_finished', sessionId: 's1', turnId: 't-s1', status: 'cancelled' });
      expect(performance.now() - t0).toBeLessThan(1000);
      for (const run of runs) expect(await run).toMatchObject({ status: 'cancelled', report: { reason: 'cancel.shutdown' } });
    });
  });
}

describe.skipIf(!(await backends('fleet-shutdown (slow link)'))[0]!.up)('shutdown with a fleet whose Redis link is slow', () => {
  it('waits for the records even when each command takes 150 ms to reach Redis', async () => {
    const proxy = await RedisProxy.start();
    const scene = new FleetScene(uniquePrefix(), () => client(proxy.port));
    const direct = new FleetScene(scene.prefix, () => client());
    try {
      const a = await scene.instance('A');
      const b = await direct.instance('B');
      const h = held();
      const run = a.fleet.run('s1', h.body, { turnId: 't1' });
      await h.started;
      proxy.latencyMs = 150;
      await a.runner.shutdown();
      expect(await b.fleet.turn('s1')).toMatchObject({ turnId: 't1', status: 'cancelled', reason: 'cancel.shutdown' });
      expect(await b.fleet.stop('s1')).toMatchObject({ outcome: 'already_finished', status: 'cancelled' });
      expect(await run).toMatchObject({ status: 'cancelled' });
      proxy.latencyMs = 0;
    } finally {
      await scene.cleanup();
      await direct.cleanup();
      await proxy.close();
      const c = await client();
      await (await import('./fixtures/fleet/support.js')).dropKeys(c, scene.prefix);
      c.destroy();
    }
  });
});
